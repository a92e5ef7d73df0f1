// Level `log` (spec 1-5): every answer is a call into dsh — `Session.append`, `session.surface`,
// `toolPairingBalancedBefore/After`, `TokenMeter.measure()`, the `contextPressure` projection unit.
import { setClock, clock } from './clock.mjs';
import { ProtocolError, appendRefusal, foldError, pairingRefusal, METER, meterStuckSeq } from './refusal.mjs';

const EVENT_KEYS = new Set(['type', 'data', 'time', 'surfaceOp', 'sourceEventSeqs']);

export function logOps(world) {
  const dsh = world.dsh.mods;
  const compaction = dsh['dsh-compaction'];

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
    cuts() {
      const session = world.session;
      const nodes = session.surface.nodes;
      try {
        if (nodes.length === 0) return { balanced: [true] };
        const balanced = nodes.map((seq) => compaction.toolPairingBalancedBefore(session, seq));
        balanced.push(compaction.toolPairingBalancedAfter(session, nodes.at(-1)));
        return { balanced };
      } catch (err) {
        return pairingRefusal(err);
      }
    },
    measure() {
      const session = world.session;
      try {
        const m = world.ctx.tokenMeter.measure(session);
        return { total: m.totalTokens, prices: m.nodes.map((n) => n.tokens), surface_tokens: m.surfaceTokens,
          baseline: { kind: m.baseline.kind, tokens: m.baseline.tokens } };
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
      if (refused.length > 0) reply.refused = refused;
      return reply;
    },
  };
}

export { clock };
