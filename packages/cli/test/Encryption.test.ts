/**
 * `inspect --outcome` on records sealed by `IdempotencyEncryption`, in a SQLite file: the envelope
 * without the keys, the plaintext with `IDEMPOTENCY_KEYS`, and a typed failure with another key.
 */
import { Idempotency, IdempotencyEncryption, IdempotencyStore } from "@effect-idempotency/core"
import { SqlIdempotencyStore } from "@effect-idempotency/sql"
import { assert, describe, it } from "@effect/vitest"
import * as Effect from "effect/Effect"
import * as Redacted from "effect/Redacted"
import * as Schema from "effect/Schema"
import { layerClient, scopedDatabaseFile } from "../../sql/test/utils/databases.js"
import { cli, Code, parsed } from "./utils/cli.js"

const material = () => Buffer.from(globalThis.crypto.getRandomValues(new Uint8Array(32))).toString("base64")

describe("effect-idempotency inspect --outcome on sealed records", () => {
  it.scopedLive(
    "opens a sealed outcome only with IDEMPOTENCY_KEYS; another key fails with the store's error",
    () =>
      Effect.gen(function*() {
        const file = yield* scopedDatabaseFile
        const k1 = material()
        const charge = Idempotency.make({
          name: "charge",
          payload: Schema.Struct({ amount: Schema.Number }),
          success: Schema.Struct({ card: Schema.String }),
          execute: () => Effect.succeed({ card: "4242-4242" })
        })
        yield* Effect.gen(function*() {
          const raw = yield* SqlIdempotencyStore.make({ migrate: true })
          const sealed = yield* IdempotencyEncryption.make(raw, { keys: [{ id: "k1", key: Redacted.make(k1) }] })
          yield* charge.run({ key: "order-1", payload: { amount: 10 } }).pipe(
            Effect.provideService(IdempotencyStore.IdempotencyStore, sealed)
          )
        }).pipe(Effect.provide(layerClient("sqlite", { file })))
        const inspect = ["inspect", "--json", "--outcome", "--store", `sqlite:${file}`, "charge", "order-1"]

        const without = yield* cli(inspect)
        assert.strictEqual(without.code, Code.Ok, without.stderr)
        const envelope: string = parsed(without).record.outcomeText
        assert.isTrue(envelope.startsWith("v1.k1."))
        assert.notInclude(without.stdout, "4242")

        const opened = yield* cli(inspect, { env: { IDEMPOTENCY_KEYS: `k2:${material()},k1:${k1}` } })
        assert.strictEqual(opened.code, Code.Ok, opened.stderr)
        assert.strictEqual(parsed(opened).record.outcomeText, JSON.stringify({ card: "4242-4242" }))

        const other = yield* cli(inspect, { env: { IDEMPOTENCY_KEYS: `k2:${material()}` } })
        assert.strictEqual(other.code, Code.StoreError, other.stdout + other.stderr)
        assert.include(parsed(other).error.message, "UnknownKey")
        assert.notInclude(other.stdout + other.stderr, "4242")

        const short = Buffer.from(new Uint8Array(16)).toString("base64")
        const bad = yield* cli(inspect, { env: { IDEMPOTENCY_KEYS: `k1:${short}` } })
        assert.strictEqual(bad.code, Code.Usage, bad.stdout + bad.stderr)
        assert.notInclude(bad.stdout + bad.stderr, short)
      }),
    { timeout: 120_000 }
  )
})
