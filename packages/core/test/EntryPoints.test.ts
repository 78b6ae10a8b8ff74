/**
 * The four ways in (`once`, `fn`, `handler`, `make`), `result` and `makeConfig`: the same protocol
 * through each, and the success, failure and requirement channels exactly as declared (the
 * `expectTypeOf` lines are checked by `npm run typecheck`).
 */
import type { IdempotencyError } from "@effect-idempotency/core"
import { Idempotency, IdempotencyContext, IdempotencyStore } from "@effect-idempotency/core"
import { assert, describe, expectTypeOf, it } from "@effect/vitest"
import * as Config from "effect/Config"
import * as ConfigProvider from "effect/ConfigProvider"
import * as Context from "effect/Context"
import * as Effect from "effect/Effect"
import * as Fiber from "effect/Fiber"
import * as Option from "effect/Option"
import * as Schema from "effect/Schema"
import * as TestClock from "effect/TestClock"
import * as Tracer from "effect/Tracer"

const Charge = Schema.Struct({ customerId: Schema.String, amountCents: Schema.Int })
type Charge = typeof Charge.Type
class Receipt extends Schema.Class<Receipt>("Receipt")({ chargeId: Schema.String, amountCents: Schema.Int }) {}
class PaymentDeclined extends Schema.TaggedError<PaymentDeclined>()("PaymentDeclined", { reason: Schema.String }) {}
class PaymentsDown extends Schema.TaggedError<PaymentsDown>()("PaymentsDown", {}) {}

/** The application's payments API, with a count of the charges it made. */
class Payments extends Context.Tag("test/Payments")<Payments, {
  readonly charge: (charge: Charge, key: string) => Effect.Effect<Receipt, PaymentDeclined | PaymentsDown>
  readonly charges: () => number
}>() {}

/** What an idempotent call of the payments gives: `A`, the payments' failures or the engine's, on both services. */
type Charged<A> = Effect.Effect<
  A,
  PaymentDeclined | PaymentsDown | IdempotencyError.IdempotencyError,
  Payments | IdempotencyStore.IdempotencyStore
>

const paymentsLive = () => {
  let charges = 0
  return Payments.of({
    charge: (charge, key) =>
      Effect.suspend(() => {
        charges++
        return charge.amountCents > 10_000
          ? Effect.fail(new PaymentDeclined({ reason: "over the limit" }))
          : Effect.succeed(new Receipt({ chargeId: `ch_${key.slice(0, 6)}`, amountCents: charge.amountCents }))
      }),
    charges: () => charges
  })
}

const charge: Charge = { customerId: "cus_42", amountCents: 1999 }

/** Runs a test with a fresh payments API and a fresh memory store. */
const provided = <A, E>(effect: Effect.Effect<A, E, Payments | IdempotencyStore.IdempotencyStore>) =>
  Effect.flatMap(
    IdempotencyStore.makeMemory({ warn: false }),
    (store) =>
      Effect.provide(
        effect,
        Context.make(Payments, paymentsLive()).pipe(Context.add(IdempotencyStore.IdempotencyStore, store))
      )
  )

/** An existing effect, written without idempotency in mind. */
const chargeCustomer = (charge: Charge) =>
  Effect.gen(function*() {
    const payments = yield* Payments
    const key = yield* IdempotencyContext.stepKey("payments")
    return yield* payments.charge(charge, key)
  })

class CreateOrder extends Schema.TaggedRequest<CreateOrder>()("CreateOrder", {
  payload: { sku: Schema.String, quantity: Schema.Int },
  success: Schema.Struct({ orderId: Schema.String }),
  failure: Schema.Union(PaymentDeclined, PaymentsDown)
}) {}

describe("entry points", () => {
  describe("once", () => {
    it.effect("protects an existing effect: it runs once, and a retry gets the recorded outcome", () =>
      provided(Effect.gen(function*() {
        const payments = yield* Payments
        const options = { operation: "charge", key: "k-1", payload: charge, success: Receipt, failure: PaymentDeclined }
        const first = yield* chargeCustomer(charge).pipe(Idempotency.once(options))
        const retry = yield* Idempotency.result(Idempotency.once(chargeCustomer(charge), options))
        assert.instanceOf(first, Receipt)
        assert.deepStrictEqual(retry.value, first)
        assert.isTrue(retry.replayed)
        assert.strictEqual(payments.charges(), 1)
      })))

    it.effect("a declined charge is recorded and replayed, typed", () =>
      provided(Effect.gen(function*() {
        const payments = yield* Payments
        const big = { ...charge, amountCents: 50_000 }
        const options = { operation: "charge", key: "k-2", payload: big, success: Receipt, failure: PaymentDeclined }
        const first = yield* Effect.flip(chargeCustomer(big).pipe(Idempotency.once(options)))
        const retry = yield* Effect.flip(chargeCustomer(big).pipe(Idempotency.once(options)))
        assert.instanceOf(first, PaymentDeclined)
        assert.instanceOf(retry, PaymentDeclined)
        assert.strictEqual(payments.charges(), 1)
      })))

    it.effect("the same key with another payload is KeyReused", () =>
      provided(Effect.gen(function*() {
        const options = { operation: "charge", key: "k-3", success: Receipt }
        yield* chargeCustomer(charge).pipe(Idempotency.once({ ...options, payload: charge }))
        const other = { ...charge, amountCents: 1 }
        const error = yield* Effect.flip(chargeCustomer(other).pipe(Idempotency.once({ ...options, payload: other })))
        assert.strictEqual(error._tag, "KeyReused")
      })))

    it("keeps the channels: A as the schema's, E and R of the effect, plus the library's", () => {
      const piped = chargeCustomer(charge).pipe(
        Idempotency.once({ operation: "charge", key: "k", payload: charge, success: Receipt, failure: PaymentDeclined })
      )
      expectTypeOf(piped).toEqualTypeOf<
        Charged<Receipt>
      >()
    })
  })

  describe("handler", () => {
    const createOrder = Idempotency.handler(CreateOrder, (request) =>
      Effect.gen(function*() {
        const payments = yield* Payments
        const key = yield* IdempotencyContext.stepKey("payments")
        yield* payments.charge({ customerId: request.sku, amountCents: request.quantity * 100 }, key)
        return { orderId: `order-${request.sku}-${request.quantity}` }
      }))

    it.effect("an operation from a TaggedRequest class: named after its tag, typed end to end", () =>
      provided(Effect.gen(function*() {
        const payments = yield* Payments
        const request = new CreateOrder({ sku: "A-1", quantity: 2 })
        const first = yield* createOrder(request, { key: "order-key" })
        const retry = yield* Idempotency.result(createOrder(request, { key: "order-key" }))
        assert.deepStrictEqual(first, { orderId: "order-A-1-2" })
        assert.isTrue(retry.replayed)
        assert.strictEqual(createOrder.name, "CreateOrder")
        assert.strictEqual(payments.charges(), 1)
        const declined = yield* Effect.flip(createOrder(new CreateOrder({ sku: "B", quantity: 1000 }), { key: "big" }))
        assert.instanceOf(declined, PaymentDeclined)
      })))

    it("keeps the request's success and failure union", () => {
      expectTypeOf(createOrder).parameter(0).toEqualTypeOf<CreateOrder>()
      expectTypeOf(createOrder(new CreateOrder({ sku: "A", quantity: 1 }), { key: "k" })).toEqualTypeOf<
        Charged<{ readonly orderId: string }>
      >()
    })
  })

  describe("fn", () => {
    const chargeOp = Idempotency.fn("charge-fn", { payload: Charge, success: Receipt, failure: PaymentDeclined })(
      function*(charge) {
        const payments = yield* Payments
        return yield* payments.charge(charge, yield* IdempotencyContext.stepKey("payments"))
      }
    )

    it.effect("a generator body; the run's span is named after the operation", () =>
      provided(Effect.gen(function*() {
        const names: Array<string> = []
        const base = yield* Effect.tracer
        const tracer = Tracer.make({
          span: (name, parent, context, links, startTime, kind, options) => {
            names.push(name)
            return base.span(name, parent, context, links, startTime, kind, options)
          },
          context: (f, fiber) => base.context(f, fiber)
        })
        const first = yield* chargeOp.run({ key: "fn-key", payload: charge }).pipe(Effect.withTracer(tracer))
        const retry = yield* Idempotency.result(chargeOp.run({ key: "fn-key", payload: charge }))
        assert.instanceOf(first, Receipt)
        assert.isTrue(retry.replayed)
        assert.include(names, "charge-fn")
      })))

    it("infers the body's failures and requirements", () => {
      expectTypeOf(chargeOp.run({ key: "k", payload: charge })).toEqualTypeOf<
        Charged<Receipt>
      >()
    })
  })

  describe("result", () => {
    it.effect("tells a fresh execution from a replay; an effect without a run reports nothing recorded", () =>
      provided(Effect.gen(function*() {
        const options = { operation: "result", key: "r-1", payload: charge, success: Receipt }
        const fresh = yield* Idempotency.result(chargeCustomer(charge).pipe(Idempotency.once(options)))
        const replay = yield* Idempotency.result(chargeCustomer(charge).pipe(Idempotency.once(options)))
        assert.deepStrictEqual([fresh.replayed, fresh.attempt, fresh.recorded], [false, 1, true])
        assert.deepStrictEqual([replay.replayed, replay.attempt, replay.recorded], [true, 1, true])
        const plain = yield* Idempotency.result(Effect.succeed(1))
        assert.deepStrictEqual(plain, { value: 1, replayed: false, attempt: 0, recorded: false })
      })))
  })

  describe("makeConfig", () => {
    it.effect("reads the timeout and the timeout policy from Config; the options fill in the rest", () =>
      Effect.gen(function*() {
        const operation = yield* Idempotency.makeConfig(
          {
            name: "configured",
            payload: Schema.Null,
            success: Schema.String,
            timeout: "1 minute",
            execute: () => Effect.never
          },
          {
            timeout: Config.option(Config.duration("TIMEOUT")).pipe(Config.map(Option.getOrUndefined)),
            onTimeout: Idempotency.timeoutPolicyConfig("ON_TIMEOUT")
          }
        ).pipe(
          Effect.withConfigProvider(
            ConfigProvider.fromMap(new Map([["TIMEOUT", "2 seconds"], ["ON_TIMEOUT", "markUnknown"]]))
          )
        )
        const first = yield* Effect.fork(Effect.flip(operation.run({ key: "c-1", payload: null })))
        yield* TestClock.adjust("2 seconds")
        const error = (yield* Fiber.join(first)) as IdempotencyError.DownstreamTimeout
        assert.deepStrictEqual([error._tag, error.timeoutMillis, error.policy], [
          "DownstreamTimeout",
          2000,
          "markUnknown"
        ])
      }).pipe(Effect.provide(IdempotencyStore.layerMemoryWith({ warn: false }))))

    it.effect("a policy that is not one fails with a ConfigError", () =>
      Effect.gen(function*() {
        const error = yield* Effect.flip(
          Idempotency.makeConfig(
            { name: "configured", payload: Schema.Null, success: Schema.String, execute: () => Effect.succeed("x") },
            { onTimeout: Idempotency.timeoutPolicyConfig("ON_TIMEOUT") }
          ).pipe(Effect.withConfigProvider(ConfigProvider.fromMap(new Map([["ON_TIMEOUT", "sometimes"]]))))
        )
        assert.strictEqual(error._op, "InvalidData")
      }))
  })
})
