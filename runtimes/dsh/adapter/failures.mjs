// dsh's thrown compaction errors as the protocol's `failure` objects {type, rule, seq, message}: `type`/`rule`
// are the model's names (model/errors.py), chosen from the class dsh threw (its own classes, exposed by
// hooks.mjs) and from where it came from (a session append, the summarize hook); `message` is dsh's text.
import { AppendRefused } from './engine.mjs';
import { appendRefusal, METER, meterStuckSeq } from './refusal.mjs';

export const isAbort = (error) => error?.name === 'AbortError';

/** pruneContent's own post-condition guards (spec 6 step 4): plain Errors prefixed "tool-result prune:". */
export const isPruneGuard = (error) => error instanceof Error && error.constructor === Error
  && error.message.startsWith('tool-result prune:');

export function failureOf(comp, error) {
  if (error === undefined || error === null) return null;
  const { mods } = comp.world.dsh;
  const basic = mods['dsh-compaction-basic'];
  const message = error instanceof Error ? error.message : String(error);
  const make = (type, rule, seq = null) => ({ type, rule, seq, message });
  if (error instanceof AppendRefused) return make('_AppendRefused', 'append-refused');
  if (error instanceof mods['dsh-compaction'].ManualCompactionError) return make('ManualCompactionError', `manual-compaction-${error.code}`);
  if (isAbort(error)) return make('AbortError', 'aborted');
  if (isPruneGuard(error)) return make('PruneGuardError', 'tool-result-prune');
  if (comp.appendErrors.has(error)) return appendRefusal(error, comp.appendSeqs.get(error) ?? null).error;
  if (error instanceof basic.TargetPressureConfigError) return make('TargetPressureConfigError', 'target-pressure-config');
  if (error instanceof basic.SurfaceChangedError) return make('SurfaceChangedError', 'surface-changed');
  if (comp.summarizerErrors.has(error)) return make('SummarizerError', 'summarizer');
  // tool-pairing.ts throws plain Errors prefixed "tool-pairing balance:" (a corrupt surface, spec 3)
  if (error instanceof Error && error.constructor === Error && message.startsWith('tool-pairing balance:')) {
    const m = /surface seq (\d+)/.exec(message);
    return make('ToolPairingError', 'tool-pairing', m ? Number(m[1]) : null);
  }
  // the token meter throws plain Errors prefixed by its fold (spec 4.2): the measurement a compaction step took met
  // an event the meter cannot fold; the seq is the event it is stuck on, as the `measure` op names it
  if (error instanceof Error && error.constructor === Error && METER[2].test(message)) {
    return make(METER[0], METER[1], meterStuckSeq(comp.world));
  }
  if (error instanceof Error && error.constructor === Error) return make('CompactionError', 'compaction');
  return make('ModelError', 'message-shape');
}

/** `CompactionResult` (spec 8.2 step 14) as the protocol names it. */
export function resultJson(result) {
  if (result === null || result === undefined) return null;
  return { compactionId: result.compactionId, sourceCommandId: result.sourceCommandId ?? null,
    startSeq: result.startSeq, summarySeq: result.summarySeq, endSeq: result.endSeq,
    start: result.shadowedRange.start, end: result.shadowedRange.end, shadowedSeqs: [...result.shadowedSeqs],
    shadowedTokenCount: result.shadowedTokenCount };
}

/** The protocol's `faults` argument (codec.fault_fields). */
export function parseFaults(args, ProtocolError) {
  const obj = args.faults;
  const none = { fail_appends: [], flush_fails: false, cancel_during_flush: false };
  if (obj === undefined || obj === null) return none;
  const keys = ['fail_appends', 'flush_fails', 'cancel_during_flush'];
  if (typeof obj !== 'object' || Array.isArray(obj) || Object.keys(obj).some((k) => !keys.includes(k))) {
    throw new ProtocolError('bad-args', 'faults is {fail_appends?: [...], flush_fails?: bool, cancel_during_flush?: bool}');
  }
  const allowed = ['compaction/summary', 'checkpoint', 'compaction/end', 'error-close', 'prune-replace'];
  const fail = obj.fail_appends ?? [];
  if (!Array.isArray(fail) || fail.some((f) => !allowed.includes(f))) {
    throw new ProtocolError('bad-args', `faults.fail_appends entries must be among ${JSON.stringify(allowed)}`);
  }
  return { fail_appends: fail, flush_fails: Boolean(obj.flush_fails), cancel_during_flush: Boolean(obj.cancel_during_flush) };
}
