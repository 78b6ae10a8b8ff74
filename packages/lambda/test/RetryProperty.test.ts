/**
 * The retry property run on the operation a deployed handler runs (`handler.operation`): the same
 * name, schemas and policies, not a copy of them. A configuration that holds passes; a known-bad one
 * (a defect released where the downstream does not deduplicate) is caught with a duplicate write.
 */
import { IdempotencyStore } from "@effect-idempotency/core"
import type { IdempotencyPolicy } from "@effect-idempotency/core"
import { LambdaEvent, LambdaSqs } from "@effect-idempotency/lambda"
import { PlatformModel, RetryProperty, SimulatedDownstream } from "@effect-idempotency/testing"
import { assert, describe, it } from "@effect/vitest"
import * as Context from "effect/Context"
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import * as Schema from "effect/Schema"

const Charge = Schema.Struct({ chargeId: Schema.String, cents: Schema.Int })
const Charged = Schema.Struct({ receipt: Schema.Number })

/** The payments API could not be reached, or failed: nothing was charged, a retry may charge. */
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

const settings = (onDefect: IdempotencyPolicy.TimeoutPolicy) => ({
  layer: Layer.merge(
    IdempotencyStore.layerMemoryWith({ warn: false }),
    Layer.succeed(Payments, { charge: () => Effect.die("unused") })
  ),
  success: Charged,
  failure: ChargeFailed,
  // a failure may come after the write: it is stored, not released
  onFailure: () => "store" as const,
  timeout: "2 seconds" as const,
  onTimeout: "markUnknown" as const,
  onDefect
})

const eventHandler = (onDefect: IdempotencyPolicy.TimeoutPolicy) =>
  LambdaEvent.idempotent({
    name: "charge-event",
    ...settings(onDefect),
    event: Charge,
    key: (event) => event.chargeId,
    handler: (event) => Effect.flatMap(Payments, (payments) => payments.charge(event))
  })

const sqsHandler = (onDefect: IdempotencyPolicy.TimeoutPolicy) =>
  LambdaSqs.batch({
    name: "charge-sqs",
    ...settings(onDefect),
    body: Schema.parseJson(Charge),
    key: (body) => body.chargeId,
    handler: (body) => Effect.flatMap(Payments, (payments) => payments.charge(body))
  })

const charge = { chargeId: "c-1", cents: 500 }

/** The property of a handler's operation: one charge, Lambda's asynchronous retries, no deduplication. */
const propertyOf = (
  handler: { readonly operation: LambdaEvent.Operation<typeof Charge.Type, unknown, unknown, Payments> }
) => ({
  operation: handler.operation,
  payload: charge,
  platform: PlatformModel.awsLambdaAsync,
  deduplicate: false,
  services: PaymentsSimulated
})
const TIMEOUT = { timeout: 600_000 }

describe.each([
  { name: "LambdaEvent.idempotent", make: eventHandler },
  { name: "LambdaSqs.batch", make: sqsHandler }
])("RetryProperty on $name's operation", ({ make }) => {
  it.effect("the deployed configuration holds at most once under Lambda's retries", () =>
    Effect.gen(function*() {
      const handler = make("markUnknown")
      const report = yield* RetryProperty.assert(propertyOf(handler), { numRuns: 60, seed: 7 })
      assert.isTrue(report.passed)
      yield* Effect.promise(() => handler.dispose())
    }), TIMEOUT)

  it.effect(
    "a defect released where the downstream does not deduplicate is caught: the write is repeated",
    () =>
      Effect.gen(function*() {
        const handler = make("release")
        const report = yield* RetryProperty.run({
          ...propertyOf(handler),
          downstream: { kinds: ["Succeed", "ApplyThenDie"] },
          faults: false
        }, { numRuns: 300, seed: 1 })
        assert.isFalse(report.passed, report.text)
        assert.include(report.counterexample?.violations.map((violation) => violation._tag) ?? [], "DuplicateWrite")
        assert.include(report.text, "charge-")
        yield* Effect.promise(() => handler.dispose())
      }),
    TIMEOUT
  )
})
