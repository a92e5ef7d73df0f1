// The summarizing model, scripted (docs/protocol.md "summary script"; model/summarizer.py): the world's
// `llm.stream()` answer for one compaction call. dsh's own summarizeWithLlm consumes these chunks, so its
// finish/image/empty checks produce the failures (spec 8.5). The digest text is the protocol's stand-in
// summary (model.summarizer.digest), character-for-character, counted in code points as Python does.

const points = (s) => Array.from(s);

function messageText(message) {
  const parts = [];
  for (const block of message?.content ?? []) {
    const type = block?.type;
    if (type === 'text' || type === 'reasoning') parts.push(block.text ?? '');
    else if (type === 'tool-call') parts.push(`[call ${block.name ?? ''}]`);
    else if (type === 'tool-result') {
      parts.push((block.content ?? []).filter((b) => b?.type === 'text').map((b) => b.text ?? '').join(' '));
    }
  }
  return parts.join(' ');
}

const PY_WS = /^[\s\u001c-\u001f\u0085]*$/u;

/** model.summarizer.digest: section headings plus the span's text cut to `ratio` of its size. */
export function digest(messages, ratio) {
  const body = points(messages.map(messageText).join(' '));
  const keep = Math.max(1, Math.trunc(body.length * ratio));
  const head = `## Primary Request and Intent\n- condensed ${messages.length} messages\n## Current Work\n- `;
  const text = head + body.slice(0, Math.max(0, keep - points(head).length)).join('');
  return PY_WS.test(text) ? '## Current Work\n- (empty span)' : text;
}

/** One script from protocol JSON (validated like surfacecheck/runtime/codec.py summary_script). */
export function parseScript(obj, ProtocolError) {
  if (obj === null || typeof obj !== 'object' || Array.isArray(obj)) throw new ProtocolError('bad-args', 'a summary script must be a JSON object');
  const extra = Object.keys(obj).filter((k) => !['outcome', 'text', 'ratio', 'concurrent', 'usage'].includes(k));
  if (extra.length) throw new ProtocolError('bad-args', `summary script has unknown keys ${JSON.stringify(extra.sort())}`);
  let outcome = obj.outcome ?? 'text';
  if (outcome === 'concurrent') outcome = 'text';
  if (!['text', 'failure', 'empty', 'image', 'truncated', 'cancel', 'agent-cancel', 'late-cancel'].includes(outcome)) {
    throw new ProtocolError('bad-args', `unknown summary outcome ${JSON.stringify(outcome)}`);
  }
  if (obj.text != null && typeof obj.text !== 'string') throw new ProtocolError('bad-args', 'summary script text must be a string');
  const ratio = obj.ratio ?? 0.25;
  if (typeof ratio !== 'number' || ratio < 0) throw new ProtocolError('bad-args', 'summary script ratio must be a non-negative number');
  const concurrent = obj.concurrent ?? [];
  if (!Array.isArray(concurrent) || concurrent.some((c) => !Array.isArray(c) || ![3, 4].includes(c.length) || typeof c[0] !== 'string')) {
    throw new ProtocolError('bad-args', 'concurrent entries are [type, data, surfaceOp, sourceEventSeqs?]');
  }
  const usage = obj.usage ?? null;
  if (usage !== null && !(Array.isArray(usage) && usage.length === 2 && usage.every(Number.isInteger))) {
    throw new ProtocolError('bad-args', 'summary script usage must be [inputTokens, outputTokens]');
  }
  return { outcome, text: obj.text ?? null, ratio, concurrent, usage };
}

/** The op's `summaries` (or single `summary`), or null when it gave none. */
export function parseScripts(args, ProtocolError) {
  if (args.summaries != null) {
    if (!Array.isArray(args.summaries)) throw new ProtocolError('bad-args', "argument 'summaries' must be a list of summary scripts");
    return args.summaries.map((s) => parseScript(s, ProtocolError));
  }
  if (args.summary != null) return [parseScript(args.summary, ProtocolError)];
  return null;
}

export const DEFAULT_SCRIPT = { outcome: 'text', text: null, ratio: 0.25, concurrent: [], usage: null };

/**
 * The chunks the scripted model streams for one summary request. `world` supplies the side effects the
 * script asks for: `appendConcurrent(entry)` (another producer writing while the summary runs) and
 * `abort(which)` ('caller' | 'agent'). `options` is the request dsh built (its last message is dsh's
 * instruction; the rest is the replayed span).
 */
export async function* streamScript(script, options, world) {
  for (const entry of script.concurrent) world.appendConcurrent(entry);
  switch (script.outcome) {
    case 'cancel':
    case 'agent-cancel': {
      world.abort(script.outcome === 'agent-cancel' ? 'agent' : 'caller');
      const signal = options.signal;
      throw signal?.reason ?? new DOMException('This operation was aborted', 'AbortError');
    }
    case 'failure':
      yield { type: 'finish', reason: { kind: 'error', failure: { code: 'SCRIPTED_FAILURE', message: 'summarizer request failed (scripted)' } } };
      return;
    case 'truncated':
      yield { type: 'block-end', index: 0, block: { type: 'text', text: 'partial' } };
      yield { type: 'finish', reason: { kind: 'max-tokens' } };
      return;
    case 'image':
      yield { type: 'block-end', index: 0, block: { type: 'image', attachment: { id: 'scripted', mediaType: 'image/png', bytes: 0 } } };
      yield { type: 'finish', reason: { kind: 'stop' } };
      return;
    case 'empty':
      yield { type: 'finish', reason: { kind: 'stop' } };
      return;
    case 'late-cancel':
      world.abort('caller');
      break;
    default:
      break;
  }
  const text = script.text ?? digest(options.messages.slice(0, -1), script.ratio);
  yield { type: 'block-end', index: 0, block: { type: 'text', text } };
  if (script.usage) yield { type: 'usage', usage: { inputTokens: script.usage[0], outputTokens: script.usage[1] } };
  yield { type: 'finish', reason: { kind: 'stop' } };
}
