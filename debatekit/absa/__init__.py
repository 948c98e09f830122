"""Aspect-based sentiment pieces of the patch debate (seed 002): pure, deterministic, LLM-free.

types (tuples, edits, labels), patching (apply edits with a log), mapping (edits -> aspect
hints, mapping metrics), override (debate override), review (Stage-2 corrections), context
(Debate Review Context), moderator (rules Z B M C A D E), scoring (P/R/F1 per stage).
"""
