/**
 * The memory store in workerd (Miniflare), where `navigator.userAgent` is `Cloudflare-Workers`: a
 * Worker of the core alone, without `nodejs_compat` (no `process` at all), tells the refusal and the
 * override; a Worker of an idempotent fetch handler answers 503 on the refused store, and runs, then
 * replays, on the allowed one (made once, so that its store outlives a request). Both are bundled from the packages' sources.
 */
import { Workers } from "@effect-idempotency/test-support"
import { assert, it } from "@effect/vitest"
import * as Effect from "effect/Effect"
import * as path from "node:path"

const CORE_ONLY = `
import { IdempotencyStore } from "@effect-idempotency/core"
import { Cause, Effect, Exit, Layer, Option } from "effect"

const build = (layer) =>
  Effect.runPromiseExit(Effect.scoped(Layer.build(layer))).then((exit) => {
    if (Exit.isSuccess(exit)) return { started: true }
    const defect = Cause.dieOption(exit.cause)
    return Option.isSome(defect) && defect.value instanceof IdempotencyStore.MemoryStoreInProduction
      ? { started: false, environment: defect.value.environment }
      : { started: false, cause: String(Cause.pretty(exit.cause)) }
  })

export default {
  async fetch() {
    return Response.json({
      hasProcess: typeof globalThis.process !== "undefined",
      userAgent: navigator.userAgent,
      refused: await build(IdempotencyStore.layerMemory),
      allowed: await build(IdempotencyStore.layerMemoryWith({ warn: false, allowInProduction: true }))
    })
  }
}
`

const HANDLER = `
import { IdempotencyStore } from "@effect-idempotency/core"
import { IdempotentFetch } from "@effect-idempotency/http"

let runs = 0
const create = () => Response.json({ run: ++runs }, { status: 201 })
// made once, so its store outlives a request
const allowed = IdempotentFetch.wrap(create, {
  layer: IdempotencyStore.layerMemoryWith({ warn: false, allowInProduction: true })
})

export default {
  fetch(request) {
    if (new URL(request.url).pathname === "/allowed") return allowed(request)
    const refused = IdempotentFetch.wrap(create, { layer: IdempotencyStore.layerMemory })
    return refused(request).finally(refused.dispose)
  }
}
`

it.scopedLive(
  "in workerd: refused as Cloudflare Workers, with or without nodejs_compat; started with allowInProduction",
  () =>
    Effect.gen(function*() {
      const resolveDir = path.join(Workers.root, "packages", "http")
      const coreOnly = yield* Workers.bundleSource(CORE_ONLY, resolveDir)
      const handler = yield* Workers.bundleSource(HANDLER, resolveDir)
      const { miniflare } = yield* Workers.miniflare({
        workers: [
          { name: "core", modules: true, script: coreOnly, compatibilityDate: "2026-04-01", routes: ["core/*"] },
          {
            name: "handler",
            modules: true,
            script: handler,
            compatibilityDate: "2026-04-01",
            compatibilityFlags: ["nodejs_compat"],
            routes: ["handler/*"]
          }
        ]
      })
      const core = yield* Effect.promise(async () =>
        (await miniflare.dispatchFetch("http://core/")).json() as Promise<Record<string, unknown>>
      )
      assert.deepStrictEqual(core, {
        hasProcess: false,
        userAgent: "Cloudflare-Workers",
        refused: { started: false, environment: "Cloudflare Workers" },
        allowed: { started: true }
      })
      const post = (route: string) =>
        Effect.promise(async () =>
          Workers.answerOf(
            await miniflare.dispatchFetch(`http://handler/${route}`, {
              method: "POST",
              headers: { "idempotency-key": "k-1" },
              body: "{}"
            })
          )
        )
      assert.strictEqual((yield* post("refused")).status, 503)
      const first = yield* post("allowed")
      assert.deepStrictEqual([first.status, first.body], [201, "{\"run\":1}"])
      const replay = yield* post("allowed")
      assert.deepStrictEqual([replay.status, replay.body, replay.headers["idempotent-replayed"]], [
        201,
        "{\"run\":1}",
        "true"
      ])
    }),
  120_000
)
