/**
 * An order-creating operation over a simulated orders API, with its policies as parameters: the
 * configurations the kit's own tests check.
 */
import { Idempotency } from "@effect-idempotency/core"
import type { IdempotencyPolicy } from "@effect-idempotency/core"
import { PlatformModel, RetryProperty, SimulatedDownstream } from "@effect-idempotency/testing"
import { assert, it } from "@effect/vitest"
import * as Context from "effect/Context"
import type * as Duration from "effect/Duration"
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import * as Schema from "effect/Schema"

/** Cases per property: the full count in CI; `PROPERTY_RUNS` lowers it for local iteration. */
export const runs = (full: number): number => Math.min(full, Number(process.env.PROPERTY_RUNS ?? full))

/** Runs a property that must hold over `numRuns` cases, and returns its report. */
export const passes = <P, A, E, R, ROut = never, RS = never>(
  options: RetryProperty.Options<P, A, E, R, ROut, RS>,
  numRuns: number
) =>
  Effect.gen(function*() {
    const report = yield* RetryProperty.run(options, { numRuns })
    assert.isTrue(report.passed, report.text)
    assert.strictEqual(report.numRuns, numRuns)
    return report
  })

/**
 * A test that the property of `options` holds over `full` runs (fewer under `PROPERTY_RUNS`), whose
 * report `check` reads.
 */
export const holds = (
  name: string,
  options: OrderOptions,
  full: number,
  check: (report: RetryProperty.Report) => void
) => it.effect(name, () => Effect.map(passes(options, runs(full)), check), { timeout: 600_000 })

export const Order = Schema.Struct({ sku: Schema.String, quantity: Schema.Int })
export type Order = typeof Order.Type
export const Created = Schema.Struct({ orderId: Schema.Number })

/** A deterministic rejection: the API refused the order. */
export class OrderRejected extends Schema.TaggedError<OrderRejected>()("OrderRejected", { call: Schema.Number }) {}
/** A transient failure: the API could not be reached, or failed. */
export class OrdersUnavailable extends Schema.TaggedError<OrdersUnavailable>()("OrdersUnavailable", {}) {}

/** The application's orders API. */
export class OrdersApi extends Context.Tag("test/OrdersApi")<OrdersApi, {
  readonly create: (order: Order) => Effect.Effect<{ readonly orderId: number }, OrderRejected | OrdersUnavailable>
}>() {}

/**
 * The orders API over the simulated downstream: code `Rejected` is a rejection, any other is
 * transient. Its client forwards the key as `IdempotencyHttpClient` would, unless `forwardKey` is
 * `false`.
 */
export const ordersApi = (
  options?: { readonly forwardKey?: boolean }
): Layer.Layer<OrdersApi, never, SimulatedDownstream.SimulatedDownstream> =>
  Layer.effect(
    OrdersApi,
    Effect.map(SimulatedDownstream.SimulatedDownstream, (downstream) => ({
      create: (order) =>
        downstream.call({
          endpoint: "POST /orders",
          body: order,
          ...(options?.forwardKey === false ? { idempotencyKey: false } : {})
        }).pipe(
          Effect.map((receipt) => ({ orderId: receipt.writeId })),
          Effect.mapError((error) =>
            error.code === "Rejected" ? new OrderRejected({ call: error.call }) : new OrdersUnavailable()
          )
        )
    }))
  )

export const OrdersApiSimulated = ordersApi()

export interface Config {
  readonly name?: string
  readonly timeout: Duration.DurationInput
  readonly onTimeout: IdempotencyPolicy.TimeoutPolicy
  /** The policy of a transient failure (a rejection is always stored). */
  readonly onTransient?: IdempotencyPolicy.FailurePolicy
  readonly ttl?: Duration.DurationInput
  readonly lease?: Duration.DurationInput
  readonly heartbeat?: Duration.DurationInput
  readonly inProgress?: IdempotencyPolicy.InProgressPolicy
  /** The defect policy (default: the timeout policy). */
  readonly onDefect?: IdempotencyPolicy.TimeoutPolicy
}

export const createOrder = (config: Config) =>
  Idempotency.make({
    name: config.name ?? "create-order",
    payload: Order,
    success: Created,
    failure: Schema.Union(OrderRejected, OrdersUnavailable),
    timeout: config.timeout,
    onTimeout: config.onTimeout,
    onFailure: (error: OrderRejected | OrdersUnavailable) =>
      error._tag === "OrderRejected" ? "store" : config.onTransient ?? "release",
    ...(config.ttl === undefined ? {} : { ttl: config.ttl }),
    ...(config.lease === undefined ? {} : { lease: config.lease }),
    ...(config.heartbeat === undefined ? {} : { heartbeat: config.heartbeat }),
    ...(config.inProgress === undefined ? {} : { inProgress: config.inProgress }),
    ...(config.onDefect === undefined ? {} : { onDefect: config.onDefect }),
    execute: (order: Order) => Effect.flatMap(OrdersApi, (api) => api.create(order))
  })

export const order: Order = { sku: "A-1", quantity: 2 }

/** The property options of the order operation. */
export type OrderOptions = RetryProperty.Options<
  Order,
  typeof Created.Type,
  OrderRejected | OrdersUnavailable,
  OrdersApi,
  OrdersApi
>

/**
 * The property of `createOrder(config)` on AWS Lambda's asynchronous retries, against the simulated
 * orders API, which does not deduplicate; `overrides` changes any of it.
 */
export const property = (config: Config, overrides?: Partial<OrderOptions>): OrderOptions => ({
  operation: createOrder(config),
  payload: order,
  platform: PlatformModel.awsLambdaAsync,
  deduplicate: false,
  services: OrdersApiSimulated,
  ...overrides
})
