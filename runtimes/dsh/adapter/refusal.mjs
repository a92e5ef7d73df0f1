// dsh's thrown errors as protocol refusals {error: {type, rule, seq, message}} (docs/protocol.md).
// `message` is dsh's own text; `type`/`rule` name the failure family in the model's words (model/errors.py),
// chosen from where dsh threw (which call) and, within a call, from dsh's message prefix.

export class ProtocolError extends Error {
  constructor(type, message) { super(message); this.type = type; }
}

export function refusal(type, rule, seq, message) {
  return { error: { type, rule, seq: seq ?? null, message: String(message) } };
}

const messageOf = (err) => (err instanceof Error ? err.message : String(err));

/** `Session.append` threw (spec 1.3): envelope/JSON/legacy-header checks, else surface validation (1.4). */
export function appendRefusal(err, seq) {
  const msg = messageOf(err);
  if (/non-JSON-serializable|unsupported legacy/.test(msg)) return refusal('SessionAppendError', 'session-append', seq, msg);
  return refusal('SurfaceError', 'surface', seq, msg);
}

/** A fold threw on the event at `seq`: its own family when dsh's prefix names it, else an unreadable shape. */
export function foldError(err, seq, family) {
  const msg = messageOf(err);
  const [type, rule, pattern] = family;
  if (err instanceof Error && err.constructor === Error && pattern.test(msg)) return { type, rule, seq, message: msg };
  return { type: 'ModelError', rule: 'message-shape', seq,
    message: `event at seq ${seq} has a shape dsh cannot read: ${err?.name ?? 'Error'}: ${msg}` };
}

export const METER = ['TokenMeterError', 'token-meter', /^(token meter|token surface|cannot assemble)/];

/** The seq of the event dsh's token meter is stuck on (its fold failed there and retries it, spec 4.2), or null
 * when it has read the whole log (an error assembling a measurement names no event). */
export function meterStuckSeq(world) {
  const session = world.session;
  const state = world.ctx.tokenMeter.states.get(session);
  return state && state.consumedEvents < session.events.length ? state.consumedEvents : null;
}
export const CLAIM = ['ProjectionClaimError', 'shadow-claim-mismatch', /no adjacent shadow price/];

/** toolPairingBalancedBefore/After threw (spec 3). */
export function pairingRefusal(err) {
  const msg = messageOf(err);
  if (err instanceof Error && err.constructor === Error && msg.startsWith('tool-pairing balance:')) {
    const m = /surface seq (\d+)/.exec(msg);
    return refusal('ToolPairingError', 'tool-pairing', m ? Number(m[1]) : null, msg);
  }
  return refusal('ModelError', 'message-shape', null,
    `tool-pairing balance: a surface node has a shape dsh cannot read: ${err?.name ?? 'Error'}: ${msg}`);
}
