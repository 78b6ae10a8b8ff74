import { AdminTypeId } from "@effect-idempotency/core/IdempotencyAdmin"
import { LeaseLost, StoreError } from "@effect-idempotency/core/IdempotencyError"
import type { StoreFailure } from "@effect-idempotency/core/IdempotencyError"
import type { IdempotencyRecord, Status } from "@effect-idempotency/core/IdempotencyRecord"
import { outcomeToColumns, ReserveResult, StoredOutcome } from "@effect-idempotency/core/IdempotencyRecord"
import type { ClockSource, IdempotencyStore, TokenRequest } from "@effect-idempotency/core/IdempotencyStore"
import * as Clock from "effect/Clock"
import * as Duration from "effect/Duration"
import * as Effect from "effect/Effect"
import * as Either from "effect/Either"
import * as Option from "effect/Option"
import * as Schema from "effect/Schema"
import type { Redis } from "ioredis"
import * as Scripts from "../RedisScripts.js"
import * as Admin from "./admin.js"
import type { Connection } from "./connection.js"
import { toStoreFailure } from "./errors.js"
import { keyOf, keyPattern } from "./keys.js"
import type { Decoder, Kind } from "./replies.js"
import { checked, outcomeOf } from "./replies.js"

type Store = IdempotencyStore["Type"]

/** @internal */
export interface Config {
  readonly prefix: string
  readonly clock: ClockSource
  readonly maxOutcomeBytes: number
  readonly purgeMaxPages: number
  readonly spans: boolean
}

/** @internal */
export const DEFAULT_PURGE_LIMIT = 1000

const SCAN_COUNT = 1000

const PURGE_CONCURRENCY = 16

/** About 142,000 years: `now + d` stays a safe integer. */
const MAX_MILLIS = 2 ** 52

const millis = (duration: Duration.Duration): string =>
  String(Math.min(Math.ceil(Duration.toMillis(duration)), MAX_MILLIS))

const purgeLimit = (limit: number | undefined): number =>
  limit === undefined || Number.isNaN(limit) ? DEFAULT_PURGE_LIMIT : Math.max(0, Math.floor(limit))

type ReserveReply =
  | readonly [1, number, number, number]
  | readonly [0, Status, string, string, number, number, number, number, string, string]

type GetReply = readonly [] | readonly [Status, string, string, number, number, number, string, string]

const RESERVED: ReadonlyArray<Kind> = ["integer", "integer", "integer", "integer"]
const EXISTING: ReadonlyArray<Kind> = [
  "integer",
  "status",
  "string",
  "string",
  "integer",
  "integer",
  "integer",
  "integer",
  "string",
  "string"
]
const RECORD: ReadonlyArray<Kind> = ["status", "string", "string", "integer", "integer", "integer", "string", "string"]

const decodeReserve: Decoder<ReserveReply> = (reply) => {
  if (!Array.isArray(reply)) return Either.left("the reply of the reserve script is not an array")
  if (reply[0] === 1) return checked("reserve", reply, RESERVED, 1)
  if (reply[0] === 0) return checked("reserve", reply, EXISTING, 1)
  return Either.left("the reply of the reserve script does not start with 0 or 1")
}

const decodeGet: Decoder<GetReply> = (reply) => {
  if (!Array.isArray(reply)) return Either.left("the reply of the get script is not an array")
  return reply.length === 0 ? Either.right([] as const) : checked("get", reply, RECORD, 0)
}

const decodeFlag: Decoder<0 | 1> = (reply) =>
  reply === 0 || reply === 1 ? Either.right(reply) : Either.left("the reply of a script is not 0 or 1")

const decodeScan = Schema.decodeUnknownEither(Schema.Tuple(Schema.String, Schema.Array(Schema.String)))

/** @internal */
export const make = (connection: Connection, config: Config): Store => {
  const { clock, maxOutcomeBytes, prefix } = config
  const scripts = {
    reserve: connection.prepare(Scripts.reserve),
    complete: connection.prepare(Scripts.complete),
    release: connection.prepare(Scripts.release),
    markFailed: connection.prepare(Scripts.markFailed),
    extend: connection.prepare(Scripts.extend),
    get: connection.prepare(Scripts.get),
    purge: connection.prepare(Scripts.purge)
  }

  const send = <A, E>(
    method: string,
    run: (key: string, args: ReadonlyArray<string>) => Effect.Effect<unknown, unknown>,
    key: string,
    args: (now: string) => ReadonlyArray<string>,
    onReply: (reply: unknown) => Effect.Effect<A, E>
  ): Effect.Effect<A, E | StoreFailure> => {
    const sent = (now: string) =>
      Effect.matchEffect(run(key, args(now)), {
        onFailure: (error) => Effect.fail(toStoreFailure(method)(error)),
        onSuccess: onReply
      })
    return clock === "effect" ? Effect.flatMap(Clock.currentTimeMillis, (now) => sent(String(now))) : sent("")
  }

  const decoded =
    <A, B>(method: string, decode: Decoder<A>, f: (reply: A) => B) => (reply: unknown): Either.Either<B, StoreError> =>
      Either.mapBoth(decode(reply), { onLeft: (cause) => new StoreError({ method, cause }), onRight: f })

  // without a stack trace: it would point into this file, at a cost on every call
  const spanOptions = { attributes: { "db.system": "redis" }, captureStackTrace: false }
  const method = <A, E>(name: string, effect: Effect.Effect<A, E>): Effect.Effect<A, E | StoreError> => {
    const typed = Effect.catchAllDefect(effect, (cause) => Effect.fail(new StoreError({ method: name, cause })))
    return config.spans ? Effect.withSpan(typed, `RedisStore.${name}`, spanOptions) : typed
  }

  // fenced by the token: a reply of 0 is `LeaseLost` (README.md#the-scripts)
  const owned = (
    name: LeaseLost["method"],
    run: (key: string, args: ReadonlyArray<string>) => Effect.Effect<unknown, unknown>,
    request: TokenRequest,
    args: ReadonlyArray<string>
  ): Effect.Effect<void, LeaseLost | StoreFailure> =>
    method(
      name,
      send(
        name,
        run,
        keyOf(prefix, request.id.value),
        (now) => [now, request.token, ...args],
        (reply): Effect.Effect<void, LeaseLost | StoreError> => {
          const flag = decodeFlag(reply)
          if (Either.isLeft(flag)) return Effect.fail(new StoreError({ method: name, cause: flag.left }))
          return flag.right === 1
            ? Effect.void
            : Effect.fail(new LeaseLost({ method: name, recordId: request.id.value }))
        }
      )
    )

  const reserve: Store["reserve"] = (request) =>
    method(
      "reserve",
      send(
        "reserve",
        scripts.reserve,
        keyOf(prefix, request.id.value),
        (now) => [
          now,
          request.token,
          request.fingerprint,
          millis(request.lease),
          millis(request.ttl),
          request.takeover ? "1" : "0"
        ],
        decoded("reserve", decodeReserve, (reply): ReserveResult =>
          reply[0] === 1
            ? ReserveResult.Reserved({
              token: request.token,
              attempt: reply[1],
              leaseUntil: reply[2],
              expiresAt: reply[3]
            })
            : ReserveResult.Existing({
              record: {
                status: reply[1],
                token: reply[2],
                fingerprint: reply[3],
                attempt: reply[4],
                leaseUntil: reply[5],
                expiresAt: reply[6],
                outcome: outcomeOf(reply[8], reply[9])
              },
              now: reply[7]
            }))
      )
    )

  const complete: Store["complete"] = (request) => {
    const { body, kind } = outcomeToColumns(request.outcome)
    const bytes = Buffer.byteLength(body, "utf8")
    if (bytes <= maxOutcomeBytes) {
      return owned("complete", scripts.complete, request, [kind, body, millis(request.ttl)])
    }
    // still COMPLETED, or a retry would execute again (README.md#outcome-size)
    const reason = `its ${bytes} bytes exceed the store's limit of ${maxOutcomeBytes} bytes (maxOutcomeBytes)`
    const omitted = outcomeToColumns(StoredOutcome.Omitted({ reason }))
    return Effect.zipRight(
      Effect.logWarning(`idempotency: the outcome was not recorded: ${reason}`).pipe(
        Effect.annotateLogs({ recordId: request.id.value })
      ),
      owned("complete", scripts.complete, request, [omitted.kind, omitted.body, millis(request.ttl)])
    )
  }

  const release: Store["release"] = (request) => owned("release", scripts.release, request, [])

  const markFailed: Store["markFailed"] = (request) =>
    owned("markFailed", scripts.markFailed, request, [millis(request.ttl)])

  const extend: Store["extend"] = (request) => owned("extend", scripts.extend, request, [millis(request.lease)])

  const get: Store["get"] = (id) =>
    method(
      "get",
      send(
        "get",
        scripts.get,
        keyOf(prefix, id.value),
        (now) => [now],
        decoded("get", decodeGet, (reply): Option.Option<IdempotencyRecord> =>
          reply.length === 0 ? Option.none() : Option.some({
            status: reply[0],
            token: reply[1],
            fingerprint: reply[2],
            attempt: reply[3],
            leaseUntil: reply[4],
            expiresAt: reply[5],
            outcome: outcomeOf(reply[6], reply[7])
          }))
      )
    )

  // ioredis's `keyPrefix` is prepended to the keys of scripts, but `SCAN` neither applies nor strips it
  const clientPrefix = (connection.client.options as { readonly keyPrefix?: string } | undefined)?.keyPrefix ?? ""
  const pattern = keyPattern(clientPrefix + prefix)

  const scan = (name: string, node: Redis, cursor: string, match: string, count: number) =>
    Effect.tryPromise({
      try: () => node.scan(cursor, "MATCH", match, "COUNT", count),
      catch: (error) => error
    }).pipe(
      Effect.mapError(toStoreFailure(name)),
      Effect.flatMap((reply) =>
        Either.match(decodeScan(reply), {
          onLeft: (cause) => Effect.fail(new StoreError({ method: name, cause })),
          onRight: Effect.succeed
        })
      )
    )

  const purgeKey = (key: string) =>
    send(
      "purgeExpired",
      scripts.purge,
      key.slice(clientPrefix.length),
      (now) => [now],
      decoded("purgeExpired", decodeFlag, (flag) => flag)
    )

  // README.md#expiry: with the server's clock there is nothing to purge, and no round trip
  const purgeExpired: Store["purgeExpired"] = (options) => {
    if (clock === "server") return Effect.succeed(0)
    const limit = purgeLimit(options?.limit)
    return method(
      "purgeExpired",
      Effect.gen(function*() {
        yield* Effect.mapError(connection.connected, toStoreFailure("purgeExpired"))
        let deleted = 0
        for (const node of connection.scanNodes()) {
          let cursor = "0"
          let pages = 0
          do {
            const [next, keys] = yield* scan("purgeExpired", node, cursor, pattern, SCAN_COUNT)
            cursor = next
            pages++
            // a batch cut short by the limit skips no key: the next starts right after it
            for (let i = 0; i < keys.length && deleted < limit;) {
              const batch = keys.slice(i, i + Math.min(PURGE_CONCURRENCY, limit - deleted))
              const flags = yield* Effect.forEach(batch, purgeKey, { concurrency: PURGE_CONCURRENCY })
              deleted += flags.filter((flag) => flag === 1).length
              i += batch.length
            }
          } while (cursor !== "0" && pages < config.purgeMaxPages && deleted < limit)
          if (deleted >= limit) break
        }
        return deleted
      })
    )
  }

  const store: Store = { reserve, complete, release, markFailed, extend, get, purgeExpired }
  const admin = Admin.make({ connection, prefix, clientPrefix, send, decoded, method, scan })
  return Object.assign(store, { [AdminTypeId]: admin })
}
