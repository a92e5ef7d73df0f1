// `meter_replay {events, header?}` (docs/protocol.md, level `log`; spec 4.2-4.3): dsh's `TokenMeter.measure` over a
// handed log. The meter reads only `session.events` and keeps its fold per session object (a WeakMap), so a fresh
// `{events}` gets a fresh fold from seq 0: a log no Session.append validated, which the meter must refuse where it
// cannot fold it ("fail loud": a replace range off the surface or reversed, an answer citing a later, a repeated, a
// non-chunk or another step's source). The checks mirror surfacecheck/runtime/meter_log.py: the log keeps to the
// shapes dsh and the model read alike, and only the seqs a range or a citation names are left free.
import { ProtocolError, foldError, METER } from './refusal.mjs';

const KEYS = new Set(['type', 'seq', 'time', 'data', 'surfaceOp', 'sourceEventSeqs', 'ignorable']);
const SURFACE_TYPES = new Set(['user/message', 'assistant/message', 'tool/result']);
const natural = (v) => Number.isInteger(v) && v >= 0;
const isObject = (v) => v !== null && typeof v === 'object' && !Array.isArray(v);

/** A JSON copy, deeply frozen: dsh never holds a protocol object, and its events are immutable (spec 1.1). */
function frozenCopy(value) {
  const freeze = (v) => {
    if (v !== null && typeof v === 'object') {
      for (const item of Object.values(v)) freeze(item);
      Object.freeze(v);
    }
    return v;
  };
  return freeze(JSON.parse(JSON.stringify(value)));
}

function markerProblem(op) {
  if (op === 'append') return null;
  const keys = isObject(op) ? Object.keys(op).sort().join(',') : '';
  if (keys !== 'end,op,start' || op.op !== 'replace') return "surfaceOp is 'append' or {op: 'replace', start, end}";
  if (!natural(op.start) || !natural(op.end)) return "a replace's start and end are non-negative integers";
  return null;
}

/** `events`, checked (meter_log.handed_log) and copied. */
export function handedLog(args) {
  const events = args.events;
  if (!Array.isArray(events)) throw new ProtocolError('bad-args', "argument 'events' must be a list of events");
  events.forEach((event, index) => {
    const where = `events[${index}]`;
    const bad = (message) => { throw new ProtocolError('bad-args', `${where}${message}`); };
    if (!isObject(event)) bad(' must be a JSON object');
    const extra = Object.keys(event).filter((k) => !KEYS.has(k)).sort();
    if (extra.length) bad(` has unknown keys ${JSON.stringify(extra)}`);
    if (typeof event.type !== 'string') bad('.type must be a string');
    if (event.seq !== index || typeof event.seq !== 'number') bad(`.seq must be ${index} (a log's seqs are its positions, spec 1.3)`);
    if (event.time !== undefined && event.time !== null && !Number.isInteger(event.time)) bad('.time must be an integer');
    if (!('data' in event)) bad(' has no data');
    if (SURFACE_TYPES.has(event.type) && !('surfaceOp' in event)) bad(' is surface-eligible and carries no surfaceOp');
    const problem = 'surfaceOp' in event ? markerProblem(event.surfaceOp) : null;
    if (problem) bad(`: ${problem}`);
    const cites = event.sourceEventSeqs;
    if ('sourceEventSeqs' in event && (!Array.isArray(cites) || !cites.every(natural))) {
      bad('.sourceEventSeqs is a list of non-negative integers');
    }
  });
  return frozenCopy(events);
}

/** The optional `header` (meter_log.request_header): an EpochHeader measure prices in place of the logged one. */
export function requestHeader(args) {
  const header = args.header;
  if (header === undefined || header === null) return undefined;
  if (!isObject(header) || !isObject(header.config)) {
    throw new ProtocolError('bad-args', 'header is an EpochHeader {config: {...}, system?, tools?, adapterDefaults?}');
  }
  for (const [key, ok, name] of [['system', (v) => typeof v === 'string', 'a string'], ['tools', Array.isArray, 'a list'],
    ['adapterDefaults', isObject, 'an object']]) {
    if (key in header && !ok(header[key])) throw new ProtocolError('bad-args', `header.${key} is ${name}`);
  }
  return frozenCopy(header);
}

/** `measure`'s answer from dsh's TokenMeasurement. */
export function measurement(m) {
  return { total: m.totalTokens, prices: m.nodes.map((n) => n.tokens), surface_tokens: m.surfaceTokens,
    baseline: { kind: m.baseline.kind, tokens: m.baseline.tokens } };
}

/** The seq of the event the meter's fold of `log` stopped on (meterStuckSeq for a handed log), or null. */
function stuckSeq(meter, log) {
  const state = meter.states.get(log);
  return state && state.consumedEvents < log.events.length ? log.events[state.consumedEvents].seq : null;
}

export function meterOps(world) {
  return {
    meter_replay(args) {
      const log = { events: handedLog(args) };
      const header = requestHeader(args);
      const meter = world.ctx.tokenMeter;
      try {
        return measurement(meter.measure(log, header));
      } catch (err) {
        return { error: foldError(err, stuckSeq(meter, log), METER) };
      }
    },
  };
}
