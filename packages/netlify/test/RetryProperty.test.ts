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
import { Charges } from "@effect-idempotency/test-support"
import { PlatformModel, RetryProperty } from "@effect-idempotency/testing"
import { assert, describe, it } from "@effect/vitest"
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import * as Schema from "effect/Schema"

/** The deployed layer: its store and payments client are replaced by the property's. */
const layer = Layer.merge(IdempotencyStore.layerMemoryWith({ warn: false }), Charges.PaymentsUnused)

/** A failure may come after the write: it is answered 409, and recorded. */
const charged = (charge: typeof Charges.Charge.Type) =>
  Effect.flatMap(Charges.Payments, (payments) => payments.charge(charge)).pipe(
    Effect.map((receipt) => ({ status: 201, body: receipt })),
    Effect.catchTag("ChargeFailed", () => Effect.succeed({ status: 409, body: { error: "charge failed" } }))
  )

const fetchHandler = (onDefect: IdempotencyPolicy.TimeoutPolicy) =>
  IdempotentFetch.make({
    name: "charge-fetch",
    layer,
    ...Charges.policies(onDefect),
    prepare: (incoming) => Effect.flatMap(Effect.orDie(incoming.text), Schema.decode(Schema.parseJson(Charges.Charge))),
    handler: (charge) => Effect.map(charged(charge), ({ body, status }) => Response.json(body, { status }))
  })

// a Netlify function has no `onDefect` of its own: a defect gets its timeout policy
const netlifyFunction = (onTimeout: IdempotencyPolicy.TimeoutPolicy) =>
  NetlifyFunction.idempotent({
    name: "charge-netlify",
    layer,
    onTimeout,
    payload: Charges.Charge,
    handler: (charge) => Effect.map(charged(charge), ({ body, status }) => FunctionResponse.json(body, { status }))
  })

const property = {
  payload: { body: Charges.charge },
  platform: PlatformModel.netlifySynchronous,
  deduplicate: false,
  services: Charges.PaymentsSimulated
} as const
const { defectsOnly, repeats, TIMEOUT } = Charges

describe.each([
  { name: "IdempotentFetch.make", make: fetchHandler },
  { name: "NetlifyFunction.idempotent", make: netlifyFunction }
])("RetryProperty on $name's operation", ({ make }) => {
  it.effect("the deployed configuration holds at most once under a client's resends", () =>
    Effect.gen(function*() {
      const handler = make("markUnknown")
      const report = yield* RetryProperty.run({ ...property, operation: handler.operation }, Charges.good)
      assert.isTrue(report.passed, report.text)
      yield* Effect.promise(() => handler.dispose())
    }), TIMEOUT)

  it.effect(
    "a defect released where the downstream does not deduplicate is caught: the write is repeated",
    () =>
      Effect.gen(function*() {
        const handler = make("release")
        repeats(
          yield* RetryProperty.run({ ...property, ...defectsOnly, operation: handler.operation }, Charges.bad)
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
        payload: Charges.Charge,
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
      Effect.provide(Layer.succeed(Charges.Payments, { charge: () => Effect.succeed({ receipt: 7 }) }))
    ))
})
