import type { Idempotency, IdempotencyStore } from "@effect-idempotency/core"
import type { Effect, Layer } from "effect"

/** Starts PGlite on a loopback port; `url` is a connection string for it. */
export declare const startPostgres: () => Promise<{ readonly url: string; readonly stop: () => Promise<void> }>

/** Starts dynalite on a loopback port, with credentials for the SDK's default chain in the environment. */
export declare const startDynamoDb: () => Promise<{ readonly endpoint: string; readonly stop: () => Promise<void> }>

/**
 * A store README's snippet, run twice: the second run returns the recorded order; then its
 * operation once more on its store, through `Idempotency.result`: a replay. Returns the first run's order.
 */
export declare const runTwiceThenReplay: <A>(snippet: {
  readonly createOrder: Idempotency.Operation<{ readonly sku: string; readonly quantity: number }, A, unknown, never>
  readonly program: Effect.Effect<A, unknown>
  readonly StoreLive: Layer.Layer<IdempotencyStore.IdempotencyStore, unknown>
}) => Promise<A>
