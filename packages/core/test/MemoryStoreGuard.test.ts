/**
 * The memory store refuses a deployed runtime (README.md#stores): each environment is played by
 * the variables and globals that runtime sets, and the store is built through each public entry.
 */
import { IdempotencyStore } from "@effect-idempotency/core"
import { assert, describe, it } from "@effect/vitest"
import * as Cause from "effect/Cause"
import * as Effect from "effect/Effect"
import * as Exit from "effect/Exit"
import * as Layer from "effect/Layer"
import * as Option from "effect/Option"
import { afterEach, vi } from "vitest"
import * as environment from "../src/internal/environment.js"

afterEach(() => {
  vi.unstubAllEnvs()
  vi.unstubAllGlobals()
})

interface Runtime {
  readonly name: string
  readonly expected: string
  readonly enter: () => void
}

const runtimes: ReadonlyArray<Runtime> = [
  {
    name: "AWS Lambda (its function name)",
    expected: "AWS Lambda",
    enter: () => vi.stubEnv("AWS_LAMBDA_FUNCTION_NAME", "create-order")
  },
  {
    name: "AWS Lambda (its execution environment)",
    expected: "AWS Lambda",
    enter: () => vi.stubEnv("AWS_EXECUTION_ENV", "AWS_Lambda_nodejs22.x")
  },
  {
    name: "Netlify Functions (the runtime's read-only variables, on Lambda)",
    expected: "Netlify Functions",
    enter: () => {
      vi.stubEnv("SITE_ID", "1d01c0c0-4554-4747-93b8-34ce3448ab95")
      vi.stubEnv("SITE_NAME", "petsof")
      vi.stubEnv("AWS_LAMBDA_FUNCTION_NAME", "netlify-fn")
    }
  },
  {
    name: "Netlify Functions (the Netlify global)",
    expected: "Netlify Functions",
    enter: () => vi.stubGlobal("Netlify", { env: {}, context: null })
  },
  {
    name: "Cloudflare Workers",
    expected: "Cloudflare Workers",
    enter: () => vi.stubGlobal("navigator", { userAgent: "Cloudflare-Workers" })
  },
  {
    name: "NODE_ENV=production",
    expected: "NODE_ENV=production",
    enter: () => vi.stubEnv("NODE_ENV", "production")
  }
]

const entries: ReadonlyArray<{
  readonly name: string
  readonly build: (options?: IdempotencyStore.MemoryOptions) => Effect.Effect<unknown, never, never>
}> = [
  { name: "layerMemory", build: () => Effect.scoped(Layer.build(IdempotencyStore.layerMemory)) },
  {
    name: "layerMemoryWith",
    build: (options) => Effect.scoped(Layer.build(IdempotencyStore.layerMemoryWith({ warn: false, ...options })))
  },
  { name: "makeMemory", build: (options) => IdempotencyStore.makeMemory({ warn: false, ...options }) }
]

const refusal = (exit: Exit.Exit<unknown>): IdempotencyStore.MemoryStoreInProduction | undefined => {
  if (Exit.isSuccess(exit)) return undefined
  const defect = Cause.dieOption(exit.cause)
  return Option.isSome(defect) && defect.value instanceof IdempotencyStore.MemoryStoreInProduction
    ? defect.value
    : undefined
}

describe("the memory store's production guard", () => {
  it.effect("starts under vitest, whose NODE_ENV is not production", () =>
    Effect.gen(function*() {
      assert.notStrictEqual(process.env.NODE_ENV, "production")
      for (const entry of entries) {
        const exit = yield* Effect.exit(entry.build())
        assert.isTrue(Exit.isSuccess(exit), entry.name)
      }
    }))

  for (const runtime of runtimes) {
    it.effect(`refuses ${runtime.name}, through each entry, with a message that says what to do`, () =>
      Effect.gen(function*() {
        runtime.enter()
        for (const entry of entries) {
          const error = refusal(yield* Effect.exit(entry.build()))
          assert.isDefined(error, entry.name)
          assert.strictEqual(error!._tag, "MemoryStoreInProduction")
          assert.strictEqual(error!.environment, runtime.expected)
          assert.include(error!.message, runtime.expected)
          assert.include(error!.message, "allowInProduction: true")
        }
      }))

    it.effect(`starts on ${runtime.name} with allowInProduction, and the store works`, () =>
      Effect.gen(function*() {
        runtime.enter()
        for (const entry of entries.slice(1)) {
          const exit = yield* Effect.exit(entry.build({ allowInProduction: true }))
          assert.isTrue(Exit.isSuccess(exit), entry.name)
        }
        const store = yield* IdempotencyStore.makeMemory({ warn: false, allowInProduction: true })
        assert.strictEqual(yield* store.purgeExpired(), 0)
      }))
  }

  it.effect("does not refuse the local emulators, nor a long-lived container's AWS_EXECUTION_ENV", () =>
    Effect.gen(function*() {
      vi.stubGlobal("Netlify", { env: {}, context: null })
      vi.stubEnv("NETLIFY_DEV", "true")
      assert.isTrue(Exit.isSuccess(yield* Effect.exit(entries[0]!.build())), "netlify dev")
      vi.unstubAllGlobals()
      vi.unstubAllEnvs()
      vi.stubEnv("AWS_LAMBDA_FUNCTION_NAME", "create-order")
      vi.stubEnv("AWS_SAM_LOCAL", "true")
      assert.isTrue(Exit.isSuccess(yield* Effect.exit(entries[0]!.build())), "sam local")
      vi.unstubAllEnvs()
      vi.stubEnv("AWS_EXECUTION_ENV", "AWS_ECS_FARGATE")
      assert.isTrue(Exit.isSuccess(yield* Effect.exit(entries[0]!.build())), "ECS")
    }))

  it("reads no `process` where the runtime has none (a Worker without nodejs_compat)", () => {
    vi.stubGlobal("navigator", { userAgent: "Cloudflare-Workers" })
    vi.stubGlobal("process", undefined)
    let found: environment.Production | undefined
    try {
      found = environment.production(environment.probe())
    } finally {
      vi.unstubAllGlobals()
    }
    assert.strictEqual(found, "Cloudflare Workers")
    vi.stubGlobal("process", undefined)
    let elsewhere: environment.Production | undefined = "AWS Lambda"
    try {
      elsewhere = environment.production(environment.probe())
    } finally {
      vi.unstubAllGlobals()
    }
    assert.isUndefined(elsewhere)
  })
})
