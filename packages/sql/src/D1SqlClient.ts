/**
 * A sqlite `SqlClient` over a Cloudflare D1 binding (README, "Cloudflare D1 and Durable Objects").
 *
 * @example
 * ```ts
 * import { Idempotency } from "@effect-idempotency/core"
 * import { D1SqlClient, SqlIdempotencyStore } from "@effect-idempotency/sql"
 * import { Effect, Layer, Schema } from "effect"
 *
 * interface Env {
 *   readonly DB: D1SqlClient.D1Database
 * }
 *
 * const Order = Schema.Struct({ orderId: Schema.String })
 *
 * // per request, as `env` is; the table comes from a D1 migration (SqlIdempotencyMigration.statements)
 * const StoreLive = (env: Env) => SqlIdempotencyStore.layer.pipe(Layer.provide(D1SqlClient.layer(env.DB)))
 *
 * export default {
 *   fetch: (request: Request, env: Env): Promise<Response> =>
 *     Effect.sync(() => ({ orderId: crypto.randomUUID() })).pipe(
 *       Idempotency.once({
 *         operation: "create-order",
 *         key: request.headers.get("Idempotency-Key") ?? "",
 *         payload: { path: new URL(request.url).pathname },
 *         success: Order
 *       }),
 *       Effect.map((order) => Response.json(order)),
 *       Effect.catchAll((error) => Effect.succeed(Response.json({ error: error._tag }, { status: 409 }))),
 *       Effect.provide(StoreLive(env)),
 *       Effect.runPromise
 *     )
 * }
 * ```
 *
 * @since 0.1.0
 */
import * as Reactivity from "@effect/experimental/Reactivity"
import * as SqlClient from "@effect/sql/SqlClient"
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import * as Cloudflare from "./internal/cloudflare.js"

/**
 * A D1 binding (`env.DB`), as far as the client uses it.
 *
 * @since 0.1.0
 * @category models
 */
export interface D1Database {
  prepare(query: string): D1PreparedStatement
}

/**
 * A prepared statement of D1.
 *
 * @since 0.1.0
 * @category models
 */
export interface D1PreparedStatement {
  bind(...values: Array<unknown>): D1PreparedStatement
  all(): Promise<D1Result>
  raw(): Promise<Array<Array<unknown>>>
}

/**
 * The answer of `all()`: the rows, and the statement's metadata.
 *
 * @since 0.1.0
 * @category models
 */
export interface D1Result {
  readonly results: ReadonlyArray<Readonly<Record<string, unknown>>>
  readonly meta: { readonly changes: number }
}

/**
 * Options of the client.
 *
 * @since 0.1.0
 * @category models
 */
export interface Options {
  readonly spanAttributes?: Readonly<Record<string, unknown>> | undefined
}

const failure = Cloudflare.failure("D1")

/**
 * A `SqlClient` over a D1 binding.
 *
 * @since 0.1.0
 * @category constructors
 */
export const make = (
  db: D1Database,
  options?: Options
): Effect.Effect<SqlClient.SqlClient, never, Reactivity.Reactivity> => {
  const resultOf = (sql: string, params: ReadonlyArray<unknown>) =>
    Effect.tryPromise({ try: () => db.prepare(sql).bind(...params).all(), catch: failure })
  return Cloudflare.make({
    rows: (sql, params) => Effect.map(resultOf(sql, params), (result) => result.results),
    raw: (sql, params) =>
      Effect.map(resultOf(sql, params), (result) => ({ rows: result.results, changes: result.meta.changes })),
    values: (sql, params) => Effect.tryPromise({ try: () => db.prepare(sql).bind(...params).raw(), catch: failure })
  }, {
    noTransactions:
      "D1 has no interactive transactions: each statement commits on its own (use one statement, or D1's batch)",
    spanAttributes: options?.spanAttributes
  })
}

/**
 * The client as a layer of `SqlClient`.
 *
 * @since 0.1.0
 * @category layers
 */
export const layer = (db: D1Database, options?: Options): Layer.Layer<SqlClient.SqlClient> =>
  Layer.effect(SqlClient.SqlClient, make(db, options)).pipe(Layer.provide(Reactivity.layer))
