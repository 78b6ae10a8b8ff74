/**
 * Clients that count what a store sends, for the round-trip tests and the benchmark: a `SqlClient`
 * whose `unsafe` counts statements (one round trip each; `withTransaction` counted too when the
 * counter has a `transactions` field), and a `pg` client class that counts every query it sends on
 * the wire, and an ioredis client that records the commands it sends; and an operation that counts
 * its downstream's executions.
 *
 * @example
 * const sent = { statements: 0 }
 * const StoreLive = SqlIdempotencyStore.layer.pipe(Layer.provide(Counting.layerSql(sent)))
 * const [result, statements] = yield* Counting.counted(sent, operation.run({ key, payload }))
 */
import { Idempotency } from "@effect-idempotency/core"
import * as SqlClient from "@effect/sql/SqlClient"
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import * as Ref from "effect/Ref"
import * as Schema from "effect/Schema"
import type * as Scope from "effect/Scope"
import type { Command, RedisOptions } from "ioredis"
import { Redis } from "ioredis"
import { randomUUID } from "node:crypto"
import * as Pg from "pg"

/** What a client was asked to send. */
export interface Sent {
  statements: number
  /** Counted when present: the `withTransaction` calls. */
  transactions?: number
}

/** `sql`, with every `unsafe` (and `withTransaction`, when `sent` counts them) counted into `sent`. */
export const sql = (client: SqlClient.SqlClient, sent: Sent): SqlClient.SqlClient =>
  new Proxy(client, {
    get(target, property, receiver) {
      const value = Reflect.get(target, property, receiver)
      if (typeof value !== "function") return value
      if (property === "unsafe") {
        return (...args: Array<unknown>) => {
          sent.statements++
          return Reflect.apply(value, target, args)
        }
      }
      if (property === "withTransaction" && sent.transactions !== undefined) {
        return (...args: Array<unknown>) => {
          sent.transactions!++
          return Reflect.apply(value, target, args)
        }
      }
      return value
    }
  })

/** The context's `SqlClient`, counted into `sent`. */
export const layerSql = (sent: Sent): Layer.Layer<SqlClient.SqlClient, never, SqlClient.SqlClient> =>
  Layer.effect(SqlClient.SqlClient, Effect.map(SqlClient.SqlClient, (client) => sql(client, sent)))

/** Runs an effect and returns its result with the number of statements it sent. */
export const counted = <A, E, R>(
  sent: { readonly statements: number },
  effect: Effect.Effect<A, E, R>
): Effect.Effect<readonly [A, number], E, R> =>
  Effect.suspend(() => {
    const before = sent.statements
    return Effect.map(effect, (result) => [result, sent.statements - before] as const)
  })

/** What a `pg` client sent: its statements, and their texts while `capture` is set. */
export interface PgSent {
  statements: number
  capture?: boolean
  readonly texts?: Array<string>
}

/** A `pg` client class (for `new Pg.Pool({ Client })`) that counts the statements it sends into `sent`. */
export const pgClient = (sent: PgSent): typeof Pg.Client =>
  class extends Pg.Client {
    override query(...args: Array<any>): any {
      sent.statements++
      if (sent.capture === true) {
        const text: unknown = typeof args[0] === "string" ? args[0] : args[0]?.text
        if (typeof text === "string") sent.texts?.push(text)
      }
      return (Pg.Client.prototype.query as (...args: Array<any>) => any).apply(this, args)
    }
  }

/** Commands a Redis connection opens with, not sent by a store. */
const HANDSHAKE = new Set(["info", "client", "select", "auth", "hello"])

/**
 * An ioredis client on `url` that records the name of every command it sends (but its connection's
 * handshake) into `sent`, disconnected when the scope closes.
 */
export const redis = (
  url: string,
  options: RedisOptions,
  sent: Array<string>
): Effect.Effect<Redis, never, Scope.Scope> =>
  Effect.acquireRelease(
    Effect.sync(() => {
      class CountingRedis extends Redis {
        override sendCommand(command: Command, stream?: Parameters<Redis["sendCommand"]>[1]): unknown {
          if (!HANDSHAKE.has(command.name)) sent.push(command.name)
          return super.sendCommand(command, stream)
        }
      }
      const client = new CountingRedis(url, options)
      client.on("error", () => {})
      return client
    }),
    (client) => Effect.sync(() => client.disconnect())
  )

/** The payload of `operation`, and one. */
export const Payload = Schema.Struct({ amount: Schema.Number })
export const payload = { amount: 1 }

/**
 * An operation (`<name>-<uuid>`) whose downstream counts its executions into `executions` and
 * answers their number; `around` wraps the count (a delay, a fault injected while it runs).
 */
export const operation = <E = never, R = never>(
  name: string,
  around: (count: Effect.Effect<number>) => Effect.Effect<number, E, R> = (count) => count
) =>
  Effect.map(Ref.make(0), (executions) => ({
    executions,
    operation: Idempotency.make({
      name: `${name}-${randomUUID()}`,
      payload: Payload,
      success: Schema.Number,
      execute: () => around(Ref.updateAndGet(executions, (n) => n + 1))
    })
  }))
