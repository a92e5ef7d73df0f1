"""Coverage: how much of the runtime under test a run executed (:mod:`.code`, :mod:`.v8`), which
situations and rules it reached (:mod:`.situations`), folded per source into one document (:mod:`.report`)."""
