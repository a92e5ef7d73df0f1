// Level `compaction` (spec 6-8): select_range = selectCompactableRange, prune = ToolResultPruner.pruneSession,
// compact = compactSurfaceRegion (automatic via engine.compactRegion, manual with compactNow's options).
// All dsh calls; the adapter supplies the world (scripts, faults, signals) and reads the results.
import { ProtocolError, refusal } from './refusal.mjs';
import { composition } from './engine.mjs';
import { failureOf, isAbort, isPruneGuard, parseFaults, resultJson } from './failures.mjs';
import { parseScripts } from './summarizer.mjs';
import { install as installIds } from './ids.mjs';
import { logOps } from './log.mjs';

/** codec.require: `args[key]` of `kind` ('int' | 'bool' | 'string' | 'object'); null/absent → default when optional. */
export function req(args, key, kind, { optional = false, def = undefined } = {}) {
  if (!(key in args) || (optional && args[key] === null)) {
    if (optional) return def;
    throw new ProtocolError('bad-args', `missing argument '${key}'`);
  }
  const v = args[key];
  const ok = kind === 'int' ? Number.isInteger(v) : kind === 'bool' ? typeof v === 'boolean'
    : kind === 'string' ? typeof v === 'string' : v !== null && typeof v === 'object' && !Array.isArray(v);
  if (!ok) throw new ProtocolError('bad-args', `argument '${key}' must be ${kind}`);
  return v;
}


export function ops(world) {
  const comp = composition(world);
  installIds(world);
  const { mods } = world.dsh;
  const basic = mods['dsh-compaction-basic'];
  const prunerPkg = mods['dsh-compaction-tool-result-pruner'];
  const log = logOps(world);
  const ready = comp.ready;

  async function compact(args) {
    await ready;
    const start = req(args, 'start', 'int');
    const end = req(args, 'end', 'int');
    const manual = req(args, 'manual', 'bool', { optional: true, def: false });
    const aborted = req(args, 'aborted', 'bool', { optional: true, def: false });
    const scripts = parseScripts(args, ProtocolError);
    const faults = parseFaults(args, ProtocolError);
    // `signal: false`: the caller passes no AbortSignal (dsh's parameter is optional); nothing can cancel it then
    const withSignal = req(args, 'signal', 'bool', { optional: true, def: true });
    if (!withSignal && (aborted || (scripts ?? []).some((s) => ['cancel', 'agent-cancel', 'late-cancel'].includes(s.outcome))
        || faults?.cancel_during_flush)) {
      throw new ProtocolError('bad-args', 'signal: false takes no aborted caller, no cancelling summary and no cancellation during the flush');
    }
    let error = null;
    let result = null;
    let signal;
    const [, common] = await comp.run(args, scripts, faults, async (op) => {
      signal = withSignal ? op.caller.signal : undefined;
      if (aborted) op.caller.abort();
      const session = world.session;
      try {
        if (manual) {
          result = await basic.compactSurfaceRegion(comp.engine.regionDependencies(), session, start, end, comp.agent,
            { owner: null, stability: 'selected-span', flush: async () => { await world.ctx.sessions.flush(session); } }, signal);
        } else {
          result = await comp.engine.compactRegion(start, end, comp.agent, signal);
        }
      } catch (err) {
        error = err;
      }
    });
    const failure = failureOf(comp, error);
    let kind = 'success';
    if (error !== null) {
      if (error instanceof mods['dsh-compaction'].ManualCompactionError) kind = error.code;
      else if (isAbort(error)) kind = 'aborted';
      else kind = common.appended.length ? 'failed' : 'refused';
    }
    return { kind, result: resultJson(result), failure, aborted: signal?.aborted ?? false, ...common };
  }

  function prunedFromLog(pruner, before) {
    const events = world.session.events;
    const out = [];
    for (const event of events.slice(before)) {
      if (event.type !== 'tool/result' || event.surfaceOp?.op !== 'replace') continue;
      const original = events[event.sourceEventSeqs[0]];
      out.push({ originalSeq: original.seq, replacementSeq: event.seq, callId: original.data.message.source.callId,
        charsBefore: pruner.measureContent(original.data.message.content[0].content),
        charsAfter: pruner.measureContent(event.data.message.content[0].content) });
    }
    return out;
  }

  async function prune(args) {
    await ready;
    const config = req(args, 'pruner', 'object', { optional: true, def: {} });
    let resolved;
    try {
      resolved = prunerPkg.resolveConfig(config);
    } catch (err) {
      return refusal('PrunerConfigError', 'pruner-config', null, err.message);
    }
    const faults = parseFaults(args, ProtocolError);
    // dsh's pruner methods over this config, with the world's token meter (the service's own state).
    const pruner = Object.create(prunerPkg.ToolResultPruner.prototype);
    Object.defineProperty(pruner, 'config', { value: resolved });
    Object.defineProperty(pruner, 'ctx', { value: world.ctx });
    let error = null;
    let pruned = null;
    let removed = {};
    const before = world.session.events.length;
    const [, common] = await comp.run(args, [], faults, async () => {
      try {
        const out = pruner.pruneSession(world.session);
        pruned = out.pruned;
        removed = { charsRemoved: out.charsRemoved }; // what pruneSession returns beside its entries
      } catch (err) {
        error = err;
      }
    });
    if (error !== null && !comp.appendErrors.has(error) && !isPruneGuard(error)) {
      return refusal('ModelError', 'message-shape', null,
        `the log holds an event whose shape dsh cannot read: ${error?.name ?? 'Error'}: ${error?.message ?? error}`);
    }
    const entries = pruned ?? prunedFromLog(pruner, before);
    const kind = error !== null ? 'failed' : entries.length ? 'pruned' : 'none';
    return { kind, pruned: entries, failure: failureOf(comp, error), ...removed, ...common };
  }

  return {
    select_range(args) {
      const retain = req(args, 'retain_tokens', 'int');
      if (retain < 0) throw new ProtocolError('bad-args', 'retain_tokens must be a non-negative integer');
      const session = world.session;
      let measurement;
      try {
        measurement = world.ctx.tokenMeter.measure(session);
      } catch {
        return { error: log.measure().error };
      }
      try {
        const span = basic.selectCompactableRange(session, measurement, retain);
        return { range: span === null ? null : { start: span.start, end: span.end } };
      } catch (err) {
        return { error: failureOf(comp, err) };
      }
    },
    prune,
    compact,
  };
}
