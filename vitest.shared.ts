import { defineConfig } from "vitest/config"

/**
 * Shared by every package: tests run from the TypeScript sources, resolved through the
 * `source` export condition, without a prior build.
 */
export default defineConfig({
  ssr: {
    resolve: {
      conditions: ["source", "node", "development|production"]
    }
  },
  test: {
    include: ["test/**/*.test.ts"],
    testTimeout: 60_000,
    hookTimeout: 120_000,
    env: {
      AWS_SDK_JS_NODE_VERSION_SUPPORT_WARNING_DISABLED: "true"
    }
  }
})
