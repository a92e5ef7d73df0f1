// Level `log` (spec 1-5): every answer is a call into dsh — `Session.append`, `session.surface`,
// `toolPairingBalancedBefore/After`, `TokenMeter.measure()`, the `contextPressure` projection unit.
import { setClock, clock } from './clock.mjs';
import { ProtocolError, appendRefusal, foldError, pairingRefusal, METER, meterStuckSeq } from './refusal.mjs';
import { measurement, requestHeader } from './meter.mjs';

const EVENT_KEYS = new Set(['type', 'data', 'time', 'surfaceOp', 'sourceEventSeqs']);

export function logOps(world) {
  const dsh = world.dsh.mods;
  const compaction = dsh['dsh-compaction'];

  let seen = null;
  /** The `cuts` reader: one proxy per session (a new one after reset and reload), counting log reads. */
  function reader() {
    const session = world.session;
    if (seen?.session === session) return seen;
    const counter = { reads: 0 };
    const events = (log) => new Proxy(log, {
      get(target, key) {
        if (typeof key === 'string' && /^\d+$/.test(key)) counter.reads += 1;
        return Reflect.get(target, key);
      },
    });
    const proxy = new Proxy(session, {
      get(target, key) {
        if (key === 'events') {
          counter.reads += 1;
          return events(target.events);
        }
        const value = Reflect.get(target, key, target);
        return typeof value === 'function' ? value.bind(target) : value;
      },
    });
    seen = { session, proxy, counter };
    return seen;
  }

  function appendEvent(event) {
    if (event === null || typeof event !== 'object' || Array.isArray(event)) throw new ProtocolError('bad-args', "argument 'event' must be a JSON object");
    const extra = Object.keys(event).filter((k) => !EVENT_KEYS.has(k)).sort();
    if (extra.length) throw new ProtocolError('bad-args', `event has unknown keys ${JSON.stringify(extra)} (seq is assigned)`);
    if (typeof event.type !== 'string') throw new ProtocolError('bad-args', 'event.type must be a string');
    if (event.time !== undefined && event.time !== null && !Number.isInteger(event.time)) throw new ProtocolError('bad-args', 'event.time must be an integer');
    const session = world.session;
    const seq = session.seq;
    const opts = {};
    if ('surfaceOp' in event) opts.surfaceOp = event.surfaceOp;
    if ('sourceEventSeqs' in event) opts.sourceEventSeqs = event.sourceEventSeqs;
    const last = session.events.at(-1);
    const before = clock();
    setClock(event.time ?? (last ? last.time : 0));
    try {
      session.append(event.type, event.data, opts);
    } catch (err) {
      setClock(before); // a refused event wrote nothing: the world's clock is where the log left it
      return appendRefusal(err, seq);
    }
    return { seq, generation: session.surface.replaceGeneration };
  }

  return {
    async reset() {
      await world.open();
      setClock(0);
      return { generation: 0 };
    },
    append(args) {
      if (!('event' in args)) throw new ProtocolError('bad-args', "missing argument 'event'");
      return appendEvent(args.event);
    },
    /** The log from seq `from` on, every event as Session.append wrote it (read-only): what the runtime wrote is
     * compared, not only its types (surfacecheck mutate found the data of dsh's own events never read). */
    events(args) {
      const from = args.from ?? 0;
      if (!Number.isInteger(from) || from < 0) throw new ProtocolError('bad-args', 'from is a non-negative integer');
      return { events: world.session.events.slice(from).map((e) => JSON.parse(JSON.stringify(e))) };
    },
    surface() {
      const surface = world.session.surface;
      return { nodes: [...surface.nodes], generation: surface.replaceGeneration };
    },
    /** toolPairingBalancedBefore/After (spec 3) through a reader of the session's own: a proxy whose log reads
     * are counted (`session.events`, then each event read from it), as dsh's own tool-pairing test counts them;
     * dsh keeps its balance cache per session object, so the reader's cache is the reader's alone. */
    cuts(args) {
      const probe = args.seqs;
      if (probe !== undefined && probe !== null && (!Array.isArray(probe) || probe.some((s) => !Number.isInteger(s)))) {
        throw new ProtocolError('bad-args', 'seqs is a list of integers');
      }
      const { session, proxy, counter } = reader();
      const nodes = session.surface.nodes;
      if ((probe === undefined || probe === null) && nodes.length === 0) return { balanced: [true], reads: 0 };
      const before = counter.reads;
      try {
        if (probe === undefined || probe === null) {
          const balanced = nodes.map((seq) => compaction.toolPairingBalancedBefore(proxy, seq));
          balanced.push(compaction.toolPairingBalancedAfter(proxy, nodes.at(-1)));
          return { balanced, reads: counter.reads - before };
        }
        const at = probe.map((seq) => [compaction.toolPairingBalancedBefore(proxy, seq),
          compaction.toolPairingBalancedAfter(proxy, seq)]);
        return { before: at.map(([b]) => b), after: at.map(([, a]) => a), reads: counter.reads - before };
      } catch (err) {
        return pairingRefusal(err);
      }
    },
    /** `TokenMeter.measure(session, requestHeader?)` (spec 4.3); `header` in place of the latest logged one. */
    measure(args = {}) {
      const session = world.session;
      const header = requestHeader(args);
      try {
        return measurement(world.ctx.tokenMeter.measure(session, header));
      } catch (err) {
        // A fold error names the unread event (the meter stays there, spec 4.2); an error assembling the
        // measurement after every event was folded (headerEquals over a header dsh cannot compare) names none.
        return { error: foldError(err, meterStuckSeq(world), METER) };
      }
    },
    projection(args) {
      const usage = args.usage ?? false;
      if (typeof usage !== 'boolean') throw new ProtocolError('bad-args', 'usage is a boolean');
      const breakdown = args.breakdown ?? false;
      if (typeof breakdown !== 'boolean') throw new ProtocolError('bad-args', 'breakdown is a boolean');
      const occupancy = args.pressure ?? false;
      if (typeof occupancy !== 'boolean') throw new ProtocolError('bad-args', 'pressure is a boolean');
      const pressure = world.units.contextPressure;
      const refused = [];
      // a unit's view; dsh's registry (`snapshot`) passes it through the unit's schema, which may refuse it
      const valueOf = (key) => {
        const unit = world.units[key];
        if (unit.error) return null;
        const value = unit.def.view(unit.state);
        if (!unit.def.schema.safeParse(value).success) refused.push(key);
        return value;
      };
      const reply = pressure.error ? { total: null, error: pressure.error } : { total: pressure.state.surfaceTokens };
      if (usage) {
        const t = valueOf('tokenUsage');
        reply.usage = t === null ? null : { inputTokens: t.uncachedInputTokens, outputTokens: t.outputTokens,
          cacheReadTokens: t.cacheReadTokens, cacheWriteTokens: t.cacheWriteTokens };
      }
      if (breakdown) reply.breakdown = valueOf('contextBreakdown'); // breakdown-projection.ts (spec 5.2)
      if (occupancy) reply.pressure = valueOf('contextPressure'); // spec 5.2's view
      if (usage || breakdown || occupancy) {
        reply.changed = Object.fromEntries(['tokenUsage', 'contextBreakdown', 'contextPressure']
          .map((key) => [key, world.units[key].changedAt]));
      }
      if (refused.length > 0) reply.refused = refused;
      return reply;
    },
  };
}

export { clock };
