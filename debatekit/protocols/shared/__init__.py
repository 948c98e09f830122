"""What two or more protocols share: answer formats and prompts (`answers`), reading an answer
from a reply (`extract`), reply fields (`fields`) and who sees whom (`topology`)."""
