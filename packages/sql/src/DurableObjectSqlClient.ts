/**
 * A sqlite `SqlClient` over a Durable Object's `ctx.storage.sql` (README, "Cloudflare D1 and Durable Objects").
 *
 * @example
 * ```ts
 * import { Idempotency, IdempotencyStore } from "@effect-idempotency/core"
 * import { DurableObjectSqlClient, SqlIdempotencyStore } from "@effect-idempotency/sql"
 * import { Effect, Layer, ManagedRuntime, Schema } from "effect"
 *
 * interface State {
 *   readonly storage: { readonly sql: DurableObjectSqlClient.SqlStorage }
 * }
 *
 * const Order = Schema.Struct({ orderId: Schema.String })
 *
 * // a Durable Object that keeps its idempotency records in its own SQLite storage
 * export class Orders {
 *   readonly runtime: ManagedRuntime.ManagedRuntime<IdempotencyStore.IdempotencyStore, SqlIdempotencyStore.MakeError>
 *
 *   constructor(ctx: State) {
 *     this.runtime = ManagedRuntime.make(
 *       SqlIdempotencyStore.layerWith({ migrate: true }).pipe(
 *         Layer.provide(DurableObjectSqlClient.layer(ctx.storage.sql))
 *       )
 *     )
 *   }
 *
 *   fetch(request: Request): Promise<Response> {
 *     return this.runtime.runPromise(
 *       Effect.sync(() => ({ orderId: crypto.randomUUID() })).pipe(
 *         Idempotency.once({
 *           operation: "create-order",
 *           key: request.headers.get("Idempotency-Key") ?? "",
 *           payload: { path: new URL(request.url).pathname },
 *           success: Order
 *         }),
 *         Effect.map((order) => Response.json(order)),
 *         Effect.catchAll((error) => Effect.succeed(Response.json({ error: error._tag }, { status: 409 })))
 *       )
 *     )
 *   }
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
 * The SQL API of a Durable Object's storage (`ctx.storage.sql`), as far as the client uses it.
 *
 * @since 0.1.0
 * @category models
 */
export interface SqlStorage {
  exec(query: string, ...bindings: Array<unknown>): SqlStorageCursor
}

/**
 * The cursor of `exec`.
 *
 * @since 0.1.0
 * @category models
 */
export interface SqlStorageCursor {
  toArray(): Array<Readonly<Record<string, unknown>>>
  raw(): Iterable<Array<unknown>>
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

const failure = Cloudflare.failure("the Durable Object's SQL storage")

// the storage would bind `true` as the text "true"
const bindings = (params: ReadonlyArray<unknown>): Array<unknown> =>
  params.map((value) => typeof value === "boolean" ? (value ? 1 : 0) : value)

/**
 * A `SqlClient` over a Durable Object's SQL storage.
 *
 * @since 0.1.0
 * @category constructors
 */
export const make = (
  storage: SqlStorage,
  options?: Options
): Effect.Effect<SqlClient.SqlClient, never, Reactivity.Reactivity> => {
  const rows = (sql: string, params: ReadonlyArray<unknown>) => storage.exec(sql, ...bindings(params)).toArray()
  // exact: nothing else runs between two synchronous calls
  const totalChanges = () => Number(storage.exec("SELECT total_changes() AS n").toArray()[0]?.n)
  return Cloudflare.make({
    rows: (sql, params) => Effect.try({ try: () => rows(sql, params), catch: failure }),
    raw: (sql, params) =>
      Effect.try({
        try: () => {
          const before = totalChanges()
          const answer = rows(sql, params)
          return { rows: answer, changes: totalChanges() - before }
        },
        catch: failure
      }),
    values: (sql, params) =>
      Effect.try({ try: () => Array.from(storage.exec(sql, ...bindings(params)).raw()), catch: failure })
  }, {
    noTransactions: "a Durable Object's SQL storage runs no BEGIN: its transactions are " +
      "ctx.storage.transactionSync around synchronous code, and each statement of this client commits on its own",
    spanAttributes: options?.spanAttributes
  })
}

/**
 * The client as a layer of `SqlClient`.
 *
 * @since 0.1.0
 * @category layers
 */
export const layer = (storage: SqlStorage, options?: Options): Layer.Layer<SqlClient.SqlClient> =>
  Layer.effect(SqlClient.SqlClient, make(storage, options)).pipe(Layer.provide(Reactivity.layer))
