"""What the bot does with a turn's words, decided once (``decider``): the call's
conversation state (``conversation``), the decision as a value (``decision``) and the
call's lookups of the caller's words, each words once (``call_lookups``). The stages carry
decisions out; docs/design.md, "One decision a turn"."""
