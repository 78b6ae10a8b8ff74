import { fileURLToPath } from "node:url"
import { defineProject, mergeConfig } from "vitest/config"
import shared from "../../vitest.shared.js"

/**
 * The core's tests run with Node's `crypto` module unavailable: every import of `node:crypto` (or
 * `crypto`) by a source or test module loads a module that throws. The core must run where there
 * are no Node built-in modules (Deno, Bun, browsers, Cloudflare Workers); the Web APIs it uses
 * (`globalThis.crypto.randomUUID`, `TextEncoder`) stay available, as they are there.
 */
export default mergeConfig(
  shared,
  defineProject({
    resolve: {
      alias: [{
        find: /^(node:)?crypto$/,
        replacement: fileURLToPath(new URL("./test/utils/nodeCryptoUnavailable.ts", import.meta.url))
      }]
    },
    test: { name: "core" }
  })
)
