"""Errors the model raises, one class per failure family, each carrying dsh's message text.

Every class has a stable ``rule`` id (used by audits and findings) and the message dsh itself
throws (spec conventions: "a reference model should reproduce the class of failure and ideally
the message prefix").
"""
from __future__ import annotations


class ModelError(Exception):
    """Base class: ``rule`` names the broken rule, ``seq`` the event it is about (if any)."""

    rule = "model-error"

    def __init__(self, message: str, *, seq: int | None = None, rule: str | None = None):
        super().__init__(message)
        self.message = message
        self.seq = seq
        if rule is not None:
            self.rule = rule


class SessionAppendError(ModelError):
    """`Session.append` refused an event (spec 1.3): nothing was appended."""

    rule = "session-append"


class SurfaceError(ModelError):
    """`planSurfaceEvent` refused surface metadata (spec 1.4)."""

    rule = "surface"


class SeedError(ModelError):
    """A seed entry failed envelope / message-shape / surface validation (spec 1.5)."""

    rule = "seed"


class ToolPairingError(ModelError):
    """The tool-pairing fold met a corrupt surface (spec 3)."""

    rule = "tool-pairing"


class TokenMeterError(ModelError):
    """`TokenMeter` could not fold an event (spec 4.2)."""

    rule = "token-meter"


class ProjectionClaimError(ModelError):
    """A replace met an armed shadow-price claim for another range (spec 5.1)."""

    rule = "shadow-claim-mismatch"


class PrunerConfigError(ModelError):
    """`ToolResultPruneConfig` rejected (spec 6)."""

    rule = "pruner-config"


class CompactionConfigError(ModelError):
    """`BasicCompactionConfig` rejected at load (spec 9.1)."""

    rule = "compaction-config"


class TargetPressureConfigError(ModelError):
    """No usable capacity / retention for a routed target (spec 9.1, 9.2 step 6-7)."""

    rule = "target-pressure-config"

    def __init__(self, target_key: str, message: str):
        super().__init__(message)
        self.target_key = target_key


class CompactionError(ModelError):
    """A plain `Error` thrown by compaction-basic (region validation, shrink rule, still above threshold)."""

    rule = "compaction"


class SurfaceChangedError(CompactionError):
    """The selected span moved or was rewritten while the summary ran (spec 8.2 steps 7, 12)."""

    rule = "surface-changed"


class SummarizerError(CompactionError):
    """The summarizer failed or produced an unusable summary (spec 8.5)."""

    rule = "summarizer"

    def __init__(self, message: str, *, code: str | None = None):
        super().__init__(message)
        self.code = code


class AbortError(ModelError):
    """A signal was aborted; ``reason`` is the abort reason (spec 8.3, 11.2)."""

    rule = "aborted"

    def __init__(self, reason: str = "This operation was aborted"):
        super().__init__(reason)
        self.reason = reason


class ManualCompactionError(ModelError):
    """`ManualCompactionError(code, message)` (spec 8.4, 11.2): code is one of the six result kinds."""

    CODES = ("busy", "cancelled", "changed", "summary", "commit", "persistence")

    def __init__(self, code: str, message: str, *, cause: BaseException | None = None):
        assert code in self.CODES, code
        super().__init__(message, rule=f"manual-compaction-{code}")
        self.code = code
        self.cause = cause


class LogFormatError(ModelError):
    """A JSONL log could not be read: names the file and 1-based line (spec 1.7)."""

    rule = "log-format"

    def __init__(self, path: str, line: int | None, reason: str):
        where = f"{path}:{line}" if line is not None else path
        super().__init__(f"{where}: {reason}")
        self.path = path
        self.line = line
        self.reason = reason
