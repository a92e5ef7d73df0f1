#!/usr/bin/env node
// The Vercel AI SDK (npm "ai") at the conversation level (docs/conversation-protocol.md, § The AI SDK adapter).
//
// The AI SDK's own code under test is pruneMessages (dist/index.js, src/generate-text/prune-messages.ts), a pure
// function over ModelMessage[] with no summarizer. The SDK's docs tell users to run it before each step:
// "You can use it inside `prepareStep` when you want a simple compaction strategy" with
// `if (estimateTokens(messages) > COMPACTION_THRESHOLD) { return { messages: pruneMessages({...}) } }` and
// "When you return a `messages` override from `prepareStep`, that changed list becomes the base for later steps"
// (docs/03-agents/04-loop-control.mdx). The turn below is that loop: append the user message, then before each
// model call the docs' estimateTokens check and pruneMessages with the session's settings; the pruned list
// replaces the session's messages. The loop and the estimator are the docs' pattern, written here.
import * as peer from './peer.mjs';
import { load, version } from './modules.mjs';

const { pruneMessages } = await load('ai', 'dist/index.js');
const VERSION = version('ai');
// pruneMessages' own options, with its own defaults (its signature: reasoning = "none", toolCalls = [],
// emptyMessages = "remove"); threshold is the docs' `const COMPACTION_THRESHOLD = 100_000;` (0: prune before every
// call, as the reference page's route handler does).
const KNOWN = { reasoning: 'none', toolCalls: [], emptyMessages: 'remove', threshold: 100_000 };

/** The docs' estimator: JSON.stringify(messages).length / 4 (docs/03-agents/04-loop-control.mdx). */
export const estimateTokens = (messages) => JSON.stringify(messages).length / 4;

// -- messages, both ways -------------------------------------------------------------------------------------------
/** Neutral messages as ModelMessage[]: a run of tool messages (sharing one packed value, if any) becomes one tool
 * message of tool-result parts, as the SDK appends one tool message per step. */
export function fromNeutral(messages) {
  const out = [];
  let previous = null;
  for (const m of messages) {
    const grouped = previous?.role === 'tool' && m.role === 'tool' && previous.packed === m.packed;
    previous = m;
    if (m.role === 'system') out.push({ role: 'system', content: m.text || '' });
    else if (m.role === 'user') out.push({ role: 'user', content: [{ type: 'text', text: m.text || '' }], ...(m.summary ? { providerOptions: { surfacecheck: { summary: true } } } : {}) });
    else if (m.role === 'assistant') {
      const content = m.text ? [{ type: 'text', text: m.text }] : [];
      for (const c of m.calls || []) content.push({ type: 'tool-call', toolCallId: c.id, toolName: c.name ?? peer.TOOL, input: c.args ?? {} });
      out.push({ role: 'assistant', content });
    } else {
      const part = { type: 'tool-result', toolCallId: m.call_id, toolName: peer.TOOL, output: { type: 'text', value: m.text || '' } };
      const last = out[out.length - 1];
      if (grouped) last.content.push(part);
      else out.push({ role: 'tool', content: [part] });
    }
  }
  return out;
}

function partText(part) {
  if (part.type === 'text' || part.type === 'reasoning') return part.text;
  return '';
}

/** ModelMessage[] as neutral messages: each tool-result part one tool message, packed: k (the tool message's
 * index); an empty tool message (every result pruned, emptyMessages "keep") shows nothing. */
export function toNeutral(messages) {
  const out = [];
  messages.forEach((m, k) => {
    const parts = typeof m.content === 'string' ? [{ type: 'text', text: m.content }] : m.content;
    if (m.role === 'system') out.push({ role: 'system', text: typeof m.content === 'string' ? m.content : parts.map(partText).join('') });
    else if (m.role === 'user') {
      const n = { role: 'user', text: parts.map(partText).join('') };
      if (m.providerOptions?.surfacecheck?.summary) n.summary = true;
      out.push(n);
    } else if (m.role === 'assistant') {
      const calls = parts.filter((p) => p.type === 'tool-call').map((p) => ({ id: p.toolCallId, name: p.toolName, args: p.input }));
      out.push({ role: 'assistant', text: parts.filter((p) => p.type === 'text').map(partText).join(''), ...(calls.length ? { calls } : {}) });
    } else {
      for (const p of parts) {
        if (p.type !== 'tool-result') continue;
        out.push({ role: 'tool', call_id: p.toolCallId, text: p.output?.type === 'text' ? p.output.value : JSON.stringify(p.output?.value ?? null), packed: k });
      }
    }
  });
  return out;
}

// -- the session ---------------------------------------------------------------------------------------------------
function checkOptions(s) {
  if (!['all', 'before-last-message', 'none'].includes(s.reasoning)) throw new peer.BadArgs('reasoning must be all, before-last-message or none');
  const tc = s.toolCalls;
  const strategy = (t) => t === 'all' || t === 'before-last-message' || /^before-last-\d+-messages$/.test(t);
  const ok = tc === 'none' || (typeof tc === 'string' && strategy(tc))
    || (Array.isArray(tc) && tc.every((e) => e && typeof e === 'object' && strategy(e.type) && (e.tools === undefined || Array.isArray(e.tools))));
  if (!ok) throw new peer.BadArgs("toolCalls must be 'all', 'before-last-message', 'before-last-N-messages', 'none' or a list of {type, tools?}");
  if (!['keep', 'remove'].includes(s.emptyMessages)) throw new peer.BadArgs('emptyMessages must be keep or remove');
  if (!(typeof s.threshold === 'number' && s.threshold >= 0)) throw new peer.BadArgs('threshold must be a non-negative number');
}

class AiSession {
  constructor(args) {
    this.settings = peer.checkSettings(args.settings, KNOWN);
    checkOptions(this.settings);
    this.system = args.system ?? null;
    if (this.system !== null && typeof this.system !== 'string') throw new peer.BadArgs('system must be a string or null');
    this.messages = fromNeutral(peer.checkMessages(args.history));
  }

  answerOpen() {
    const t = this.settings.threshold;
    const trigger = !this.settings.compaction ? null
      : { kind: 'tokens', value: t, counter: 'runtime', reaches: false };
    return { settings: this.settings, trigger };
  }

  prune(messages) {
    const { reasoning, toolCalls, emptyMessages } = this.settings;
    return pruneMessages({ messages, reasoning, toolCalls, emptyMessages });
  }

  /** The docs' prepareStep: prune when estimateTokens is above the threshold; a compaction step when it changed. */
  prepareStep(steps, cause) {
    const t = this.settings.threshold;
    if (!this.settings.compaction) return;
    if (cause !== 'direct' && !(estimateTokens(this.messages) > t)) return;
    const before = this.messages;
    const after = this.prune(before);
    if (JSON.stringify(after) === JSON.stringify(before)) return;
    steps.push({ kind: 'compaction', before: toNeutral(before), after: toNeutral(after), cause,
      count_before: Math.ceil(estimateTokens(before)), count_after: Math.ceil(estimateTokens(after)) });
    this.messages = after;
  }

  async turn(args) {
    peer.checkArgs(args, ['user', 'replies', 'summaries', 'overflow_above', 'summarizer_window']);
    if (typeof args.user !== 'string') throw new peer.BadArgs('turn needs a string user');
    const steps = [];
    const replies = new peer.Replies(args.replies);
    const overflow = args.overflow_above ?? null;
    this.messages = [...this.messages, { role: 'user', content: [{ type: 'text', text: args.user }] }];
    for (let calls = 0; ; calls++) {
      if (calls >= replies.bound) {
        steps.push({ kind: 'error', type: 'loop-bound', message: `more than ${replies.bound} model calls in one turn`, typed: false });
        break;
      }
      this.prepareStep(steps, 'size');
      const neutral = toNeutral(this.messages);
      const size = peer.neutralTokens(neutral, this.system);
      const request = { kind: 'request', system: this.system, messages: neutral, overflow: false,
        tokens: Math.ceil(estimateTokens(this.messages)) };
      steps.push(request);
      if (overflow !== null && size > overflow) {
        request.overflow = true;
        // The AI SDK has no context-overflow type of its own: a provider's refusal surfaces as APICallError.
        steps.push({ kind: 'error', type: 'AI_APICallError', message: `request of ${size} tokens is above the window of ${overflow}`, typed: false });
        break;
      }
      const reply = replies.next();
      const content = reply.text ? [{ type: 'text', text: reply.text }] : [];
      for (const c of reply.calls || []) content.push({ type: 'tool-call', toolCallId: c.id, toolName: c.name ?? peer.TOOL, input: c.args ?? {} });
      this.messages = [...this.messages, { role: 'assistant', content }];
      if (!reply.calls?.length) break;
      this.messages = [...this.messages, { role: 'tool', content: reply.calls.map((c) => ({ type: 'tool-result', toolCallId: c.id, toolName: c.name ?? peer.TOOL, output: { type: 'text', value: peer.toolResult(c.args ?? {}) } })) }];
    }
    return { steps, history: toNeutral(this.messages) };
  }

  async compact(args) {
    peer.checkArgs(args, ['summaries', 'summarizer_window']);
    const steps = [];
    this.prepareStep(steps, 'direct');
    return { steps, history: toNeutral(this.messages) };
  }
}

let SESSION = null;

/** bench: one pruneMessages call over the history after each append (the open session's settings, else
 * toolCalls "before-last-2-messages", the reference page's example). */
function bench(args) {
  const settings = SESSION?.settings ?? { ...KNOWN, toolCalls: 'before-last-2-messages' };
  const message = (i) => {
    if (i % 3 === 0) return { role: 'user', content: [{ type: 'text', text: `question ${i} ` + 'x'.repeat(80) }] };
    if (i % 3 === 1) return { role: 'assistant', content: [{ type: 'tool-call', toolCallId: `c${i}`, toolName: peer.TOOL, input: { size: 80, tag: `t${i}` } }] };
    return { role: 'tool', content: [{ type: 'tool-result', toolCallId: `c${i - 1}`, toolName: peer.TOOL, output: { type: 'text', value: peer.toolResult({ size: 80, tag: `t${i}` }) } }] };
  };
  const { reasoning, toolCalls, emptyMessages } = settings;
  return peer.benchPoints(args.sizes ?? [100, 1000, 10000], args.repeats ?? 20, message,
    (messages) => pruneMessages({ messages, reasoning, toolCalls, emptyMessages }));
}

await peer.serve('ai', VERSION, async (args) => {
  SESSION = new AiSession(args);
  return [SESSION, SESSION.answerOpen()];
}, { bench }, { summarizes: false });
process.exit(0);
