#!/usr/bin/env node
// gemini-cli-core's chat compression at the conversation level (docs/conversation-protocol.md, § The Gemini adapter).
//
// gemini-cli's own code: ChatCompressionService.compress and findCompressSplitPoint
// (dist/src/context/chatCompressionService.js, with truncateHistoryToBudget, getCompressionPrompt,
// getInitialChatHistory, calculateRequestTokenCount, estimateTokenCountSync and tokenLimit it calls). The loop below
// is the adapter's, mirroring GeminiClient.processTurn (dist/src/core/client.js) before every model call:
// `const compressed = await this.tryCompressChat(prompt_id, false, signal);` then the ContextWindowWillOverflow
// check `tokenLimit(modelForLimitCheck) - this.getChat().getLastPromptTokenCount()` against the pending request's
// estimate; tryCompressChat's status handling is copied from client.js (hasFailedCompressionAttempt set on
// COMPRESSION_FAILED_INFLATED_TOKEN_COUNT unless forced; COMPRESSED starts a new chat on newHistory, whose
// lastPromptTokenCount is estimateTokenCountSync of its parts as GeminiChat's constructor sets it;
// CONTENT_TRUNCATED sets the history, which recounts the same way, GeminiChat.setHistory). The pending request
// (the user's text, or the function responses) joins the history after compression, as GeminiChat.sendMessageStream
// appends it; the model's usage promptTokenCount becomes the chat's lastPromptTokenCount.
import { mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import * as peer from './peer.mjs';
import { load, version } from './modules.mjs';

const PKG = '@google/gemini-cli-core';
const { ChatCompressionService, findCompressSplitPoint } = await load(PKG, 'dist/src/context/chatCompressionService.js');
const { CompressionStatus } = await load(PKG, 'dist/src/core/turn.js');
const { tokenLimit } = await load(PKG, 'dist/src/core/tokenLimits.js');
const { estimateTokenCountSync, calculateRequestTokenCount } = await load(PKG, 'dist/src/utils/tokenCalculation.js');
const { DEFAULT_GEMINI_MODEL } = await load(PKG, 'dist/src/config/models.js');
const { ApiError } = await load('@google/genai', 'dist/node/index.mjs');
const VERSION = version(PKG);
// "Default threshold for compression token count as a fraction of the model's token limit"
// (DEFAULT_COMPRESSION_TOKEN_THRESHOLD in chatCompressionService.js, not exported): what `?? 0.5` falls back to.
const DEFAULT_THRESHOLD = 0.5;
const KNOWN = { compressionThreshold: DEFAULT_THRESHOLD, model: DEFAULT_GEMINI_MODEL };
export { findCompressSplitPoint };

// -- contents, both ways -------------------------------------------------------------------------------------------
/** Neutral messages as Content[]: tool results travel in user contents of functionResponse parts (consecutive
 * results sharing one packed value, if any, share one content); an assistant's text and calls share one content. */
export function fromNeutral(messages) {
  const out = [];
  let previous = null;
  messages.forEach((m, i) => {
    if (m.role === 'system') throw new peer.BadArgs(`history[${i}]: Gemini keeps the system prompt outside its contents (systemInstruction); use 'system'`);
    const grouped = previous?.role === 'tool' && m.role === 'tool' && previous.packed === m.packed;
    previous = m;
    if (m.role === 'user') out.push({ role: 'user', parts: [{ text: m.text || '' }] });
    else if (m.role === 'assistant') {
      const parts = m.text ? [{ text: m.text }] : [];
      for (const c of m.calls || []) parts.push({ functionCall: { id: c.id, name: c.name ?? peer.TOOL, args: c.args ?? {} } });
      out.push({ role: 'model', parts }); // no parts: valid in GeminiChat's isValidContent, so curated
    } else {
      const part = { functionResponse: { id: m.call_id, name: peer.TOOL, response: { output: m.text || '' } } };
      if (grouped) out[out.length - 1].parts.push(part);
      else out.push({ role: 'user', parts: [part] });
    }
  });
  return out;
}

function responseText(response) {
  if (typeof response?.output === 'string') return response.output;
  return JSON.stringify(response ?? null);
}

/** Content[] as neutral messages: each functionResponse one tool message with packed: k (its content's index); a
 * user content whose text is one this session's compression produced is a summary. */
export function toNeutral(contents, summaries = new Set()) {
  const out = [];
  contents.forEach((c, k) => {
    const parts = c.parts || [];
    const texts = parts.filter((p) => typeof p.text === 'string').map((p) => p.text).join('');
    if (c.role === 'model') {
      const calls = parts.filter((p) => p.functionCall).map((p) => ({ id: p.functionCall.id, name: p.functionCall.name, args: p.functionCall.args ?? {} }));
      out.push({ role: 'assistant', text: texts, ...(calls.length ? { calls } : {}) });
      return;
    }
    const results = parts.filter((p) => p.functionResponse);
    if (results.length) {
      for (const p of results) out.push({ role: 'tool', call_id: p.functionResponse.id, text: responseText(p.functionResponse.response), packed: k });
      return;
    }
    out.push({ role: 'user', text: texts, ...(summaries.has(texts) ? { summary: true } : {}) });
  });
  return out;
}

/** A generateContent request as one text: the system instruction, then each content's role and parts. */
export function requestText(request) {
  const lines = [request.systemInstruction?.text ?? ''];
  for (const c of request.contents) {
    for (const p of c.parts || []) {
      if (typeof p.text === 'string') lines.push(`${c.role}: ${p.text}`);
      else if (p.functionCall) lines.push(`${c.role}: functionCall ${p.functionCall.name}(${JSON.stringify(p.functionCall.args ?? {})})`);
      else if (p.functionResponse) lines.push(`${c.role}: functionResponse ${p.functionResponse.name}: ${responseText(p.functionResponse.response)}`);
    }
  }
  return lines.join('\n\n');
}

// -- the stub config and chat --------------------------------------------------------------------------------------
/** Every other Config method: a no-op answering undefined, whose properties are no-ops too. */
function noop() {
  const fn = () => undefined;
  return new Proxy(fn, { get: (target, key) => (key === 'then' ? undefined : noop()) });
}

function makeConfig(session) {
  const temp = mkdtempSync(join(tmpdir(), 'surfacecheck-gemini-'));
  let truncations = 0;
  const own = {
    // Config.getCompressionThreshold: `if (this.compressionThreshold) return this.compressionThreshold;` (else the
    // remote experiment flag, absent here: undefined, and compress falls back to its default).
    getCompressionThreshold: async () => session.settings.compressionThreshold || undefined,
    getBaseLlmClient: () => ({ generateContent: (request) => session.summarize(request) }),
    getHookSystem: () => undefined,
    getContentGenerator: () => ({ countTokens: async () => ({ totalTokens: 0 }) }),
    getNextCompressionTruncationId: () => ++truncations,
    getTruncateToolOutputThreshold: () => 40_000,
    getIncludeDirectoryTree: () => false,
    getSessionMemory: () => '',
    storage: { getProjectTempDir: () => temp },
  };
  return new Proxy(own, { get: (target, key) => (key in target ? target[key] : key === 'then' ? undefined : noop()) });
}

// -- the session ---------------------------------------------------------------------------------------------------
class GeminiSession {
  constructor(args) {
    this.settings = peer.checkSettings(args.settings, KNOWN);
    const t = this.settings.compressionThreshold;
    if (!(typeof t === 'number' && t > 0 && t <= 1)) throw new peer.BadArgs('compressionThreshold must be a number in (0, 1]');
    if (typeof this.settings.model !== 'string') throw new peer.BadArgs('model must be a model name');
    this.system = args.system ?? null;
    if (this.system !== null && typeof this.system !== 'string') throw new peer.BadArgs('system must be a string or null');
    this.history = fromNeutral(peer.checkMessages(args.history));
    this.lastPromptTokenCount = this.estimate(this.history);
    this.summaryTexts = new Set();
    this.hasFailedCompressionAttempt = false;
    this.service = new ChatCompressionService();
    this.config = makeConfig(this);
    this.prompts = 0;
    this.begin({});
  }

  estimate(contents) {
    return estimateTokenCountSync(contents.flatMap((c) => c.parts || []));
  }

  answerOpen() {
    const limit = tokenLimit(this.settings.model);
    const trigger = this.settings.compaction
      ? { kind: 'tokens', value: Math.ceil(this.settings.compressionThreshold * limit), counter: 'runtime', reaches: true }
      : null;
    return { settings: this.settings, trigger };
  }

  begin(args) {
    this.steps = [];
    this.summaries = new peer.Summaries(args.summaries, this.steps, args.summarizer_window ?? null,
      (m) => new Error(m), (m) => new ApiError({ message: m, status: 400 }));
  }

  neutral(contents) {
    return toNeutral(contents, this.summaryTexts);
  }

  /** The scripted summarizer behind getBaseLlmClient().generateContent: its whole request as the prompt. */
  async summarize(request) {
    const text = await this.summaries.next(requestText(request));
    return { candidates: [{ content: { role: 'model', parts: [{ text }] } }] };
  }

  /** GeminiClient.tryCompressChat, its status handling as client.js has it, plus the compaction step. */
  async tryCompressChat(force) {
    this.prompts += 1;
    const before = this.history;
    const chat = { getHistory: () => this.history, getLastPromptTokenCount: () => this.lastPromptTokenCount };
    const { newHistory, info } = await this.service.compress(chat, `surfacecheck-${this.prompts}`, force,
      this.settings.model, this.config, this.hasFailedCompressionAttempt);
    const status = info.compressionStatus;
    if (status === CompressionStatus.COMPRESSION_FAILED_INFLATED_TOKEN_COUNT) {
      this.hasFailedCompressionAttempt = this.hasFailedCompressionAttempt || !force;
    } else if ((status === CompressionStatus.COMPRESSED || status === CompressionStatus.CONTENT_TRUNCATED) && newHistory) {
      if (status === CompressionStatus.COMPRESSED) this.summaryTexts.add(newHistory[0].parts.map((p) => p.text ?? '').join(''));
      this.history = newHistory;
      this.lastPromptTokenCount = this.estimate(newHistory);
      this.steps.push({ kind: 'compaction', before: this.neutral(before), after: this.neutral(newHistory),
        cause: force ? 'direct' : 'size', count_before: info.originalTokenCount, count_after: info.newTokenCount
      });
    }
    return info;
  }

  error(err) {
    const typed = err?.name === 'ContextWindowWillOverflow';
    this.steps.push({ kind: 'error', type: err?.name === 'Error' ? 'Error' : (err?.name ?? 'Error'), message: String(err?.message ?? err), typed });
  }

  async turn(args) {
    peer.checkArgs(args, ['user', 'replies', 'summaries', 'overflow_above', 'summarizer_window']);
    if (typeof args.user !== 'string') throw new peer.BadArgs('turn needs a string user');
    this.begin(args);
    const replies = new peer.Replies(args.replies);
    const overflow = args.overflow_above ?? null;
    let pending = { role: 'user', parts: [{ text: args.user }] };
    try {
      for (let calls = 0; ; calls++) {
        if (calls >= replies.bound) {
          this.steps.push({ kind: 'error', type: 'loop-bound', message: `more than ${replies.bound} model calls in one turn`, typed: false });
          break;
        }
        if (this.settings.compaction) await this.tryCompressChat(false);
        const remaining = tokenLimit(this.settings.model) - this.lastPromptTokenCount;
        const estimated = await calculateRequestTokenCount(pending.parts, this.config.getContentGenerator(), this.settings.model);
        if (estimated > remaining) {
          const err = new Error(`estimated request of ${estimated} tokens exceeds the ${remaining} remaining`);
          err.name = 'ContextWindowWillOverflow';
          throw err;
        }
        this.history = [...this.history, pending];
        const neutral = this.neutral(this.history);
        const size = peer.neutralTokens(neutral, this.system);
        const request = { kind: 'request', system: this.system, messages: neutral, overflow: false, tokens: size };
        this.steps.push(request);
        if (overflow !== null && size > overflow) {
          request.overflow = true;
          throw new ApiError({ message: `The input token count (${size}) exceeds the maximum number of tokens allowed (${overflow}).`, status: 400 });
        }
        const reply = replies.next();
        this.lastPromptTokenCount = size; // usageMetadata.promptTokenCount of the reply
        const parts = reply.text ? [{ text: reply.text }] : [];
        for (const c of reply.calls || []) parts.push({ functionCall: { id: c.id, name: c.name ?? peer.TOOL, args: c.args ?? {} } });
        this.history = [...this.history, { role: 'model', parts }];
        if (!reply.calls?.length) break;
        pending = { role: 'user', parts: reply.calls.map((c) => ({ functionResponse: { id: c.id, name: c.name ?? peer.TOOL, response: { output: peer.toolResult(c.args ?? {}) } } })) };
      }
    } catch (err) {
      this.error(err);
    }
    return { steps: this.steps, history: this.neutral(this.history) };
  }

  async compact(args) {
    peer.checkArgs(args, ['summaries', 'summarizer_window']);
    this.begin(args);
    if (this.settings.compaction) {
      try {
        await this.tryCompressChat(true);
      } catch (err) {
        this.error(err);
      }
    }
    return { steps: this.steps, history: this.neutral(this.history) };
  }
}

let SESSION = null;

/** bench: the pre-call check compress runs each turn when under the threshold (getLastPromptTokenCount, then
 * `originalTokenCount < threshold * tokenLimit(model)`: a NOOP), timed through compress itself on a chat whose
 * history grows; the open session's settings, else the defaults. */
async function bench(args) {
  const settings = SESSION?.settings ?? { ...KNOWN, compaction: true };
  const session = Object.create(GeminiSession.prototype);
  Object.assign(session, { settings, summaryTexts: new Set(), steps: [] });
  const config = makeConfig(session);
  const service = new ChatCompressionService();
  const message = (i) => {
    if (i % 3 === 0) return { role: 'user', parts: [{ text: `question ${i} ` + 'x'.repeat(80) }] };
    if (i % 3 === 1) return { role: 'model', parts: [{ functionCall: { id: `c${i}`, name: peer.TOOL, args: { size: 80, tag: `t${i}` } } }] };
    return { role: 'user', parts: [{ functionResponse: { id: `c${i - 1}`, name: peer.TOOL, response: { output: peer.toolResult({ size: 80, tag: `t${i}` }) } } }] };
  };
  const sizes = args.sizes ?? [100, 1000, 10000];
  const repeats = args.repeats ?? 20;
  peer.benchPoints(sizes, repeats, message, () => {}); // validates the arguments
  const points = [];
  for (const n of sizes) {
    const history = Array.from({ length: n }, (_, i) => message(i));
    const chat = { getHistory: () => history, getLastPromptTokenCount: () => 1 };
    let spent = 0n;
    for (let r = 0; r < repeats; r++) {
      history.push(message(n + r));
      const start = process.hrtime.bigint();
      const { info } = await service.compress(chat, 'bench', false, settings.model, config, false);
      spent += process.hrtime.bigint() - start;
      if (info.compressionStatus !== CompressionStatus.NOOP) throw new Error('bench: compress did more than its check');
    }
    points.push({ messages: n, seconds_per_append: Number(spent) / 1e9 / repeats });
  }
  return { points };
}

await peer.serve('gemini', VERSION, async (args) => {
  SESSION = new GeminiSession(args);
  return [SESSION, SESSION.answerOpen()];
}, { bench }, { summarizes: true });
process.exit(0);
