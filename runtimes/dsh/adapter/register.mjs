// Installs hooks.mjs before any dsh bundle is imported (serve.mjs imports this first).
import { register } from 'node:module';
register('./hooks.mjs', import.meta.url);

// Node 20 lacks the ES2024 builtin Promise.withResolvers (Node >= 22 has it); dsh-agent-loop's
// runMaintenance and wakeDriver call it. The standard definition, installed only when missing.
if (typeof Promise.withResolvers !== 'function') {
  Object.defineProperty(Promise, 'withResolvers', {
    configurable: true, writable: true,
    value: function withResolvers() {
      let resolve;
      let reject;
      const promise = new this((res, rej) => { resolve = res; reject = rej; });
      return { promise, resolve, reject };
    },
  });
}
