"""The English word rules the stages read a caller's words by: whether a sentence is
finished (``end_of_turn``), whether words follow up on the answer before (``follow_up``),
where an answer's clauses end (``clauses``), digits said aloud (``spoken_digits``). Pure
functions of text, tested as tables; no stage, model or call in here."""
