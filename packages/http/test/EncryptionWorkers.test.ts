/**
 * `IdempotencyEncryption` in workerd (Miniflare), bundled from the packages' sources: a Worker
 * without `nodejs_compat` (WebCrypto) and one with it (where the runtime may hand over its emulated
 * `node:crypto`) each seal an outcome that Node opens, open what Node sealed, refuse an envelope
 * with one character changed, and run an operation on an encrypted memory store, then replay it.
 */
import { IdempotencyEncryption } from "@effect-idempotency/core"
import { Workers } from "@effect-idempotency/test-support"
import { assert, it } from "@effect/vitest"
import * as Effect from "effect/Effect"
import * as Redacted from "effect/Redacted"
import { randomBytes } from "node:crypto"
import * as path from "node:path"

const KEY = randomBytes(32).toString("base64")
const BINDING = { recordId: "orders:k-1", token: "t-1", kind: "Success" }

const WORKER = `
import { Idempotency, IdempotencyEncryption, IdempotencyStore } from "@effect-idempotency/core"
import { Effect, Exit, Layer, ManagedRuntime, Redacted, Schema } from "effect"

const options = { keys: [{ id: "k1", key: Redacted.make(${JSON.stringify(KEY)}) }] }
const binding = ${JSON.stringify(BINDING)}
let runs = 0
const operation = Idempotency.make({
  name: "orders",
  payload: Schema.Struct({ sku: Schema.String }),
  success: Schema.Struct({ run: Schema.Number }),
  execute: () => Effect.sync(() => ({ run: ++runs }))
})
// made once, so its records outlive a request
const store = IdempotencyEncryption.layer(options).pipe(
  Layer.provide(IdempotencyStore.layerMemoryWith({ warn: false, allowInProduction: true }))
)
const runtime = ManagedRuntime.make(store)

export default {
  async fetch(request) {
    const body = await request.json()
    const sealer = await Effect.runPromise(IdempotencyEncryption.makeSealer(options))
    const exit = (effect) => Effect.runPromiseExit(effect).then((exit) =>
      Exit.isSuccess(exit) ? { ok: exit.value } : { failed: exit.cause._tag === "Fail" ? exit.cause.error.reason ?? exit.cause.error._tag : String(exit.cause) })
    switch (new URL(request.url).pathname) {
      case "/seal":
        return Response.json(await exit(sealer.seal(body.plaintext, binding)))
      case "/open":
        return Response.json(await exit(sealer.open(body.envelope, binding)))
      default: {
        const result = await runtime.runPromise(operation.runDetailed({ key: "k-1", payload: { sku: "BOOK-42" } }))
        return Response.json({ value: result.value, replayed: result.replayed })
      }
    }
  }
}
`

it.scopedLive(
  "in workerd, with and without nodejs_compat: envelopes Node opens, Node's envelopes opened, an encrypted store replays",
  () =>
    Effect.gen(function*() {
      const script = yield* Workers.bundleSource(WORKER, path.join(Workers.root, "packages", "http"))
      const { miniflare } = yield* Workers.miniflare({
        workers: [
          { name: "plain", modules: true, script, compatibilityDate: "2026-04-01", routes: ["plain/*"] },
          {
            name: "compat",
            modules: true,
            script,
            compatibilityDate: "2026-04-01",
            compatibilityFlags: ["nodejs_compat"],
            routes: ["compat/*"]
          }
        ]
      })
      const post = (url: string, body: unknown) =>
        Effect.promise(async () =>
          (await miniflare.dispatchFetch(url, { method: "POST", body: JSON.stringify(body) })).json() as Promise<
            Record<string, unknown>
          >
        )
      const node = yield* IdempotencyEncryption.makeSealer({ keys: [{ id: "k1", key: Redacted.make(KEY) }] })
      const plaintext = JSON.stringify({ chargeId: "ch_1", note: "é".repeat(300) })
      for (const worker of ["plain", "compat"]) {
        const sealed = yield* post(`http://${worker}/seal`, { plaintext })
        assert.isString(sealed.ok, `${worker}: ${JSON.stringify(sealed)}`)
        assert.strictEqual(yield* node.open(sealed.ok as string, BINDING), plaintext, worker)

        const envelope = yield* node.seal(plaintext, BINDING)
        assert.deepStrictEqual(yield* post(`http://${worker}/open`, { envelope }), { ok: plaintext }, worker)
        const last = envelope.at(-2) === "A" ? "B" : "A"
        const changed = `${envelope.slice(0, -2)}${last}${envelope.at(-1)}`
        assert.deepStrictEqual(
          yield* post(`http://${worker}/open`, { envelope: changed }),
          { failed: "Unauthentic" },
          worker
        )

        assert.deepStrictEqual(yield* post(`http://${worker}/run`, {}), { value: { run: 1 }, replayed: false }, worker)
        assert.deepStrictEqual(yield* post(`http://${worker}/run`, {}), { value: { run: 1 }, replayed: true }, worker)
      }
    }),
  120_000
)
