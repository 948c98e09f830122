"""Prompts of the patch_debate protocol (short: the local model reads ~60 tokens/s).

SPEAKER and JUDGE follow the seed's layout: instructions, then [TOPIC], [PERSONA],
[SHARED_CONTEXT_JSON] and [HISTORY] (speakers) or [ALL_TURNS] (judge).
"""

EXTRACT = (
    "You label aspect-based sentiment in one review sentence (English or Korean). Aspects are the things the "
    "reviewer judges: a dish, the service, the price, the battery, the screen... For each aspect copy its term "
    "exactly from the sentence (1-3 words) and give its polarity as the reviewer means it: irony means the "
    "opposite of the literal words; negation flips polarity ('not bad' is positive). sentence_label is mixed "
    "when there are positive and negative aspects. Confidence from 0 to 1. Reply with JSON only.")

VALIDATE = (
    "You check an aspect-sentiment extraction of one review sentence for mistakes caused by negation, irony or "
    "contrast. List issues (type, aspect_ref = an extracted term, severity, confidence) and corrections: "
    "FLIP_POLARITY (value = the right polarity), DROP_ASPECT (not an aspect), REVISE_SPAN (value = the right "
    "term from the sentence). Give your suggested sentence label (positive, negative, neutral, mixed) and "
    "confidence. If the extraction is right, give empty lists. Reply with JSON only.")

SPEAKER = (
    "You are one speaker in a patch debate on the aspect-sentiment tuples of a review sentence. Output only "
    "proposed_edits (at most 2) to the Stage-1 tuples. Ops: set_polarity (value = positive|negative|neutral), "
    "set_aspect_ref (value = the right term from the sentence), merge_tuples (value = the aspect_ref to keep), "
    "drop_tuple (not an aspect), confirm_tuple (the tuple is right). target.aspect_ref must be a Stage-1 "
    "aspect_ref copied exactly; evidence = the deciding words of the sentence. Act in your persona's role.\n"
    "[TOPIC]\n{topic}\n[PERSONA]\n{persona}\n[SHARED_CONTEXT_JSON]\n{context}\n[HISTORY]\n{history}")

JUDGE = (
    "You are the judge of a patch debate on the aspect-sentiment tuples of a review sentence. From the speakers' "
    "edits choose final_patch: the edits the sentence supports (one polarity per aspect, nothing without "
    "evidence, no over-editing). final_tuples: every aspect_ref with its polarity after the patch. "
    "unresolved_conflicts: disagreements left (may be empty). sentence_polarity: positive, negative, neutral or "
    "mixed. sentence_evidence_spans: the deciding words of the sentence.\n"
    "[TOPIC]\n{topic}\n[PERSONA]\n{persona}\n[SHARED_CONTEXT_JSON]\n{context}\n[ALL_TURNS]\n{turns}")

ATE_REVIEW = (
    "You review the aspect terms extracted from a review sentence, using the debate's result as evidence. "
    "aspect_review actions: revise_span (value = the right term from the sentence), drop (not an aspect), "
    "add (aspect_ref = a missed aspect term copied from the sentence); empty if all terms are right. Then the "
    "sentence_label (positive, negative, neutral, mixed) and your confidence. Reply with JSON only.")

ATSA_REVIEW = (
    "You review the polarity of each aspect term of a review sentence, using the debate's result as evidence "
    "(aspect_votes: weighted votes of the debaters). One sentiment_review entry per aspect: maintain, "
    "flip_polarity (polarity = the right one), drop (not an aspect), or add (a missed aspect copied from the "
    "sentence), each with polarity and confidence. Irony means the opposite of the literal words. "
    "Reply with JSON only.")
