"""The embedded runtime (``--runtime embedded``): a second, independent implementation of dsh's
session log and compaction, built the way a production runtime is.

It never imports the model's folds (surface, pairing, meter, projection, region, pruner,
transaction, policy, manual, agent, replay, session): equivalence with the model is what the suite
checks. Shared with the model are only pure values: ``model.jsvalue`` (UTF-16 lengths, JSON
equality), ``model.estimate`` (the token heuristic, spec 4.1), ``model.errors`` (error classes and
rule ids), ``model.event.ABSENT``, ``model.config`` (policy parsing and `resolveTargetPolicy` /
`resolveCompactSpec`), ``model.prune_content`` (pruning one content list, spec 6) and
``model.summarizer`` (the scripted summarizer stand-in and the checkpoint frame text).

Structures (all mutable, all incremental):

===================  ===================================================================  =========
module               structure                                                            spec
===================  ===================================================================  =========
``session``          append-only log (list of event dicts) + listeners of committed events  1.3
``surface``          surface manager: node list + seq->index map + replaceGeneration       1.4, 2
``pairing``          cut-balance cache: extends on growth, rebuilds on a generation change 3
``meter``            per-node price table (doubly linked by seq), header, step, anchor      4.2-4.3
``projection``       O(1) shadow-price projection: running total + at most one claim        5.1
``usage``            `tokenUsage`: four billing buckets + the last (turn, step) sample        5.2
``breakdown``        `contextBreakdown`: the last header's system and tools prices          5.2
``occupancy``        `contextPressure`: the last window, the newest sample and its total      5.2
``tracker``          open turn, unmatched compaction/start, latest end-seed, latest header  8.1, 4.4
``compaction``       range selection, region validation, tool-result pruner                 6, 7, 8.1
``transaction``      the locked compaction transaction                                      8
``policy``           pressure, overflow recovery with retry-after-progress, ``/compact``    9-11
``context``          retained runtime-context snapshot (live rule, reload scan), candidate  12, 13
``seed``             reload: seed shape checks and ``session/end-seed``                     1.5
===================  ===================================================================  =========

Override points for seeded bugs (see :mod:`.bugs`: subclass a component, override one method,
plug it in with ``variant``/``seeded_bug``):

* ``surface.SurfaceManager``: ``_bump_generation``, ``_splice``, ``_shadowed``, ``_check_provenance``,
  ``_range``
* ``pairing.PairingCache``: ``_needs_rebuild``, ``_rebuild_pairing_cache``, ``_extend``, ``_cut_balanced``
* ``meter.IncrementalMeter``: ``_replace_span``, ``_anchor_for``, ``_step_start``, ``_locate``
* ``projection.ShadowPriceProjection``: ``_arm``, ``_expire_claim``, ``_append``, ``_consume``,
  ``_unpriced_replace``
* ``tracker.LogTracker``: ``lock_is_live``, ``observe``
* ``compaction.Compactor``: ``retention_index``,
  ``balanced_keep``, ``validate_region``, ``prune_shadow_price``
* ``transaction.Transaction``: ``entry_checks``, ``shrink_rule``, ``assert_stable``, ``close_on_failure``
* ``policy.Engine``: ``retry_allowed``, ``below_threshold``, ``attempts``, ``observe``
* ``context.ContextRetention``: ``shadowed``, ``candidate``

Runtime component attributes a variant replaces: ``session_class`` (``surface_class`` inside it),
``meter_class``, ``projection_class``, ``pairing_class``, ``tracker_class``, ``engine_class``,
``compaction_class``, ``transaction_class``, ``context_class``.
"""
from .runtime import EmbeddedRuntime

__all__ = ["EmbeddedRuntime"]
