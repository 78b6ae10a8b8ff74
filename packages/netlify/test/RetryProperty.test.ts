/**
 * The retry property run on the operation a deployed fetch handler runs (`handler.operation`): an
 * `IdempotentFetch.make` handler's and a `NetlifyFunction.idempotent` function's, with their own
 * name, key, fingerprint and policies. A configuration that holds passes; a known-bad one (a defect
 * released where the downstream does not deduplicate) is caught with a duplicate write.
 */
import { IdempotencyStore } from "@effect-idempotency/core"
import type { IdempotencyPolicy } from "@effect-idempotency/core"
import { IdempotentFetch } from "@effect-idempotency/http"
import { FunctionResponse, NetlifyFunction } from "@effect-idempotency/netlify"
import { PlatformModel, RetryProperty, SimulatedDownstream } from "@effect-idempotency/testing"
import { assert, describe, it } from "@effect/vitest"
import * as Context from "effect/Context"
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import * as Schema from "effect/Schema"

const Charge = Schema.Struct({ chargeId: Schema.String, cents: Schema.Int })

/** The payments API could not be reached, or failed: a retry may charge, or may charge twice. */
class ChargeFailed extends Schema.TaggedError<ChargeFailed>()("ChargeFailed", {}) {}

/** The application's payments API, over the simulated downstream (no deduplication by key). */
class Payments extends Context.Tag("test/Payments")<Payments, {
  readonly charge: (charge: typeof Charge.Type) => Effect.Effect<{ readonly receipt: number }, ChargeFailed>
}>() {}

const PaymentsSimulated = Layer.effect(
  Payments,
  Effect.map(SimulatedDownstream.SimulatedDownstream, (downstream) => ({
    charge: (charge) =>
      downstream.call({ endpoint: "POST /charges", body: charge }).pipe(
        Effect.map((receipt) => ({ receipt: receipt.writeId })),
        Effect.mapError(() => new ChargeFailed())
      )
  }))
)

/** The deployed layer: its store and payments client are replaced by the property's. */
const layer = Layer.merge(
  IdempotencyStore.layerMemoryWith({ warn: false }),
  Layer.succeed(Payments, { charge: () => Effect.die("unused") })
)

const policies = (onDefect: IdempotencyPolicy.TimeoutPolicy) => ({
  timeout: "2 seconds" as const,
  onTimeout: "markUnknown" as const,
  onDefect
})

/** A failure may come after the write: it is answered 409, and recorded. */
const charged = (charge: typeof Charge.Type) =>
  Effect.flatMap(Payments, (payments) => payments.charge(charge)).pipe(
    Effect.map((receipt) => ({ status: 201, body: receipt })),
    Effect.catchTag("ChargeFailed", () => Effect.succeed({ status: 409, body: { error: "charge failed" } }))
  )

const fetchHandler = (onDefect: IdempotencyPolicy.TimeoutPolicy) =>
  IdempotentFetch.make({
    name: "charge-fetch",
    layer,
    ...policies(onDefect),
    prepare: (incoming) => Effect.flatMap(Effect.orDie(incoming.text), Schema.decode(Schema.parseJson(Charge))),
    handler: (charge) => Effect.map(charged(charge), ({ body, status }) => Response.json(body, { status }))
  })

// a Netlify function has no `onDefect` of its own: a defect gets its timeout policy
const netlifyFunction = (onTimeout: IdempotencyPolicy.TimeoutPolicy) =>
  NetlifyFunction.idempotent({
    name: "charge-netlify",
    layer,
    onTimeout,
    payload: Charge,
    handler: (charge) => Effect.map(charged(charge), ({ body, status }) => FunctionResponse.json(body, { status }))
  })

const property = {
  payload: { body: { chargeId: "c-1", cents: 500 } },
  platform: PlatformModel.netlifySynchronous,
  deduplicate: false,
  services: PaymentsSimulated
} as const
const defectsOnly = { downstream: { kinds: ["Succeed", "ApplyThenDie"] }, faults: false } as const
const TIMEOUT = { timeout: 600_000 }

const repeats = (report: RetryProperty.Report) => {
  assert.isFalse(report.passed, report.text)
  assert.include(report.counterexample?.violations.map((violation) => violation._tag) ?? [], "DuplicateWrite")
  assert.include(report.text, "charge-")
}

describe.each([
  { name: "IdempotentFetch.make", make: fetchHandler },
  { name: "NetlifyFunction.idempotent", make: netlifyFunction }
])("RetryProperty on $name's operation", ({ make }) => {
  it.effect("the deployed configuration holds at most once under a client's resends", () =>
    Effect.gen(function*() {
      const handler = make("markUnknown")
      const report = yield* RetryProperty.run({ ...property, operation: handler.operation }, { numRuns: 60, seed: 7 })
      assert.isTrue(report.passed, report.text)
      yield* Effect.promise(() => handler.dispose())
    }), TIMEOUT)

  it.effect(
    "a defect released where the downstream does not deduplicate is caught: the write is repeated",
    () =>
      Effect.gen(function*() {
        const handler = make("release")
        repeats(
          yield* RetryProperty.run({ ...property, ...defectsOnly, operation: handler.operation }, {
            numRuns: 300,
            seed: 1
          })
        )
        yield* Effect.promise(() => handler.dispose())
      }),
    TIMEOUT
  )
})

describe("the operation runs with the deployed options", () => {
  it.effect("a function's name and key are the operation's: a derived key, not the header", () =>
    Effect.gen(function*() {
      const handler = NetlifyFunction.idempotent({
        name: "charge-by-id",
        layer,
        payload: Charge,
        key: (charge) => charge.chargeId,
        handler: (charge) => Effect.map(charged(charge), ({ body, status }) => FunctionResponse.json(body, { status }))
      })
      assert.strictEqual(handler.operation.name, "charge-by-id")
      const run = (chargeId: string) =>
        handler.operation.runDetailed({ key: "ignored", payload: { body: { chargeId, cents: 1 } } })
      const first = yield* run("c-1")
      const second = yield* run("c-1")
      const other = yield* run("c-2")
      assert.isFalse(first.replayed)
      assert.isTrue(second.replayed)
      assert.isFalse(other.replayed)
      yield* Effect.promise(() => handler.dispose())
    }).pipe(
      Effect.provide(IdempotencyStore.layerMemoryWith({ warn: false })),
      Effect.provide(Layer.succeed(Payments, { charge: () => Effect.succeed({ receipt: 7 }) }))
    ))
})
