// Installs hooks.mjs before any dsh bundle is imported (serve.mjs imports this first).
import { register } from 'node:module';
register('./hooks.mjs', import.meta.url);
