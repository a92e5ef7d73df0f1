// What every Node conversation adapter shares: the JavaScript twin of surfacecheck/runtime/conversation/peer.py
// (docs/conversation-protocol.md). Node's standard library only, so it loads without the installed packages.
//
// serve() is the JSON-lines loop at the conversation level; an adapter gives it an openSession(args) returning
// [session, answer] and extra ops (bench). neutralTokens() equals Python's neutral_tokens exactly (texts are
// counted in code points and args as Python's json.dumps(sort_keys=True) writes them, non-ASCII escaped);
// Replies and Summaries are the scripted model and summarizer with the same outcomes.
import { createInterface } from 'node:readline';
import { mutationOps } from './mutation.mjs';

export const PROTOCOL = 'surfacecheck-runtime/1';
export const LEVEL = 'conversation';
export const OPS = ['open', 'turn', 'compact'];
export const TOOL = 'fetch';
export const REPLY_SLACK = 8; // a turn stops after replies.length + REPLY_SLACK model calls (error loop-bound)

/** A request this peer refuses (answered as a protocol bad-args error). */
export class BadArgs extends Error {}

/** Python's json.dumps(value, separators=(",", ":"), sort_keys=True): keys sorted, non-ASCII as \uXXXX. */
export function pyDumps(value) {
  if (value === null || value === undefined) return 'null';
  if (typeof value === 'string') {
    // Python escapes every character outside ' '..'~' (DEL and non-ASCII as UTF-16 units, lowercase hex)
    return JSON.stringify(value).replace(/[\u007f-\uffff]/g, (c) => '\\u' + c.charCodeAt(0).toString(16).padStart(4, '0'));
  }
  if (typeof value === 'number') {
    if (!Number.isFinite(value)) return value > 0 ? 'Infinity' : value < 0 ? '-Infinity' : 'NaN';
    return JSON.stringify(value); // integers and shortest round-trip floats, as Python writes them for JSON input
  }
  if (typeof value === 'boolean') return value ? 'true' : 'false';
  if (Array.isArray(value)) return '[' + value.map(pyDumps).join(',') + ']';
  const keys = Object.keys(value).sort((a, b) => (codePointCompare(a, b)));
  return '{' + keys.map((k) => pyDumps(k) + ':' + pyDumps(value[k])).join(',') + '}';
}

function codePointCompare(a, b) {
  const x = [...a].map((c) => c.codePointAt(0));
  const y = [...b].map((c) => c.codePointAt(0));
  for (let i = 0; i < Math.min(x.length, y.length); i++) if (x[i] !== y[i]) return x[i] - y[i];
  return x.length - y.length;
}

function chars(value) {
  return typeof value === 'string' ? [...value].length : pyDumps(value).length;
}

/** 4 plus ceil(chars / 4) of the text, call names and compact-JSON args. */
export function messageTokens(message) {
  let n = chars(message.text || '');
  for (const call of message.calls || []) n += chars(call.name ?? '') + chars(call.args ?? {});
  return 4 + Math.ceil(n / 4);
}

/** The neutral size of a request: every message, plus the system prompt as one more message. */
export function neutralTokens(messages, system = null) {
  const total = messages.reduce((sum, m) => sum + messageTokens(m), 0);
  return total + (system ? messageTokens({ text: system }) : 0);
}

/** What fetch(size, tag) returns: the tag, a space, then size characters. */
export function toolResult(args) {
  const size = Math.trunc(Number(args.size ?? 0));
  const tag = String(args.tag ?? 'r');
  return tag + ' ' + 'lorem ipsum dolor sit amet '.repeat(Math.floor(size / 27) + 1).slice(0, Math.max(size, 0));
}

/** The scripted model's replies, one per model call that does not overflow; {text: "done"} after. */
export class Replies {
  constructor(replies) {
    this.left = [...(replies || [])];
    this.bound = this.left.length + REPLY_SLACK;
  }

  next() {
    return this.left.length ? this.left.shift() : { text: 'done' };
  }
}

/** The scripted summarizer: next(prompt) returns the output and records a summarizer step; fail and overflow throw
 * raiseFail(msg) / raiseOverflow(msg) (the runtime's own error types). */
export class Summaries {
  constructor(script, steps, window = null, raiseFail = (m) => new Error(m), raiseOverflow = (m) => new Error(m)) {
    this.left = [...(script || [])];
    this.steps = steps;
    this.window = window ?? null;
    this.raiseFail = raiseFail;
    this.raiseOverflow = raiseOverflow;
    this.calls = 0;
  }

  async next(prompt) {
    this.calls += 1;
    const tokens = Math.ceil([...prompt].length / 4) + 4;
    const step = { kind: 'summarizer', prompt, tokens, outcome: 'text', output: null };
    this.steps.push(step);
    if (this.window !== null && tokens > this.window) {
      step.outcome = 'overflow';
      throw this.raiseOverflow(`summarizer request of ${tokens} tokens is above its window of ${this.window}`);
    }
    const item = this.left.length ? this.left.shift() : { text: `summary #${this.calls}` };
    if ('fail' in item) {
      step.outcome = 'fail';
      throw this.raiseFail(String(item.fail));
    }
    if (item.empty) {
      step.outcome = 'empty';
      step.output = '';
      return '';
    }
    if ('slow' in item) {
      await new Promise((resolve) => setTimeout(resolve, Number(item.slow) * 1000));
      step.outcome = 'slow';
    }
    step.output = String(item.text ?? `summary #${this.calls}`);
    return step.output;
  }
}

/** Neutral messages, validated (BadArgs naming the index and the reason). */
export function checkMessages(history, where = 'history') {
  if (history === null || history === undefined) return [];
  if (!Array.isArray(history)) throw new BadArgs(`${where} must be a list of messages`);
  history.forEach((m, i) => {
    if (!m || typeof m !== 'object' || !['system', 'user', 'assistant', 'tool'].includes(m.role)) {
      throw new BadArgs(`${where}[${i}]: role must be system, user, assistant or tool`);
    }
    if (typeof (m.text ?? '') !== 'string') throw new BadArgs(`${where}[${i}]: text must be a string`);
    if (m.role === 'tool' && typeof m.call_id !== 'string') {
      throw new BadArgs(`${where}[${i}]: a tool message needs a string call_id`);
    }
    for (const call of m.calls || []) {
      const args = call?.args ?? {};
      if (!call || typeof call.id !== 'string' || typeof args !== 'object' || Array.isArray(args) || args === null) {
        throw new BadArgs(`${where}[${i}]: each call needs a string id and an object args`);
      }
    }
  });
  return history;
}

/** The effective settings: known (name -> default) overlaid with settings; unknown keys refused. */
export function checkSettings(settings, known) {
  settings = settings ?? {};
  if (typeof settings !== 'object' || Array.isArray(settings)) throw new BadArgs('settings must be an object');
  const unknown = Object.keys(settings).filter((k) => !(k in known) && k !== 'compaction').sort();
  if (unknown.length) {
    throw new BadArgs(`unknown setting '${unknown[0]}'; known: ${[...Object.keys(known).sort(), 'compaction'].join(', ')}`);
  }
  return { compaction: true, ...known, ...settings };
}

/** Refuse any argument of a turn or compact outside `keys`. */
export function checkArgs(args, keys) {
  const unknown = Object.keys(args).filter((k) => !keys.includes(k)).sort();
  if (unknown.length) throw new BadArgs(`unknown argument '${unknown[0]}'`);
}

/** Answer requests until stdin ends. openSession(args) returns [session, answer]; a session has async turn(args)
 * and compact(args); extraOps (name -> async handler of args) are announced in hello after the shared ones. */
export async function serve(name, version, openSession, extraOps = {}, hello = {}) {
  extraOps = { ...extraOps, ...mutationOps() }; // surfacecheck mutate only (mutation.mjs)
  let session = null;
  const write = (obj) => process.stdout.write(JSON.stringify(obj) + '\n');
  const lines = createInterface({ input: process.stdin, crlfDelay: Infinity, terminal: false });
  for await (const raw of lines) {
    if (!raw.trim()) continue;
    let request;
    try {
      request = JSON.parse(raw);
      if (!request || typeof request !== 'object' || Array.isArray(request)) throw new Error('not an object');
    } catch {
      write({ id: null, error: { type: 'bad-request', message: 'not a JSON object request' } });
      continue;
    }
    const { id, op } = request;
    const args = request.args ?? {};
    try {
      let result;
      if (op === 'hello') {
        result = { protocol: PROTOCOL, name, levels: [LEVEL], ops: [...OPS, ...Object.keys(extraOps)],
          runtime: { name, version }, ...hello };
      } else if (op === 'open') {
        [session, result] = await openSession(args);
      } else if (op === 'turn' || op === 'compact') {
        if (session === null) throw new BadArgs(`${op} before open`);
        result = await session[op](args);
      } else if (op in extraOps) {
        result = await extraOps[op](args);
      } else {
        write({ id, error: { type: 'unknown-op', message: `unknown op '${op}'` } });
        continue;
      }
      write({ id, result });
    } catch (err) {
      if (err instanceof BadArgs) {
        write({ id, error: { type: 'bad-args', message: err.message } });
      } else {
        process.stderr.write(`internal error on ${op}: ${err?.stack ?? err}\n`);
        write({ id, error: { type: 'internal', message: `${err?.name ?? 'Error'}: ${err?.message ?? err}` } });
      }
    }
  }
}

/** Seconds per call of check(history) after one append to a history of n messages built by message(i), averaged
 * over repeats (the check must leave the history as it was: both runtimes' checks are pure). */
export function benchPoints(sizes, repeats, message, check) {
  if (!Array.isArray(sizes) || !sizes.every((n) => Number.isInteger(n) && n >= 0)) {
    throw new BadArgs('sizes must be a list of non-negative integers');
  }
  if (!Number.isInteger(repeats) || repeats < 1) throw new BadArgs('repeats must be a positive integer');
  const points = [];
  for (const n of sizes) {
    const history = Array.from({ length: n }, (_, i) => message(i));
    let spent = 0n;
    for (let r = 0; r < repeats; r++) {
      history.push(message(n + r));
      const start = process.hrtime.bigint();
      check(history);
      spent += process.hrtime.bigint() - start;
    }
    points.push({ messages: n, seconds_per_append: Number(spent) / 1e9 / repeats });
  }
  return { points };
}
