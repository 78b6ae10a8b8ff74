/**
 * The admin primitives of the Redis store; their costs are in README.md#admin.
 *
 * @internal
 */
import type { AdminStore, Count, State, StoredRecord, UnblockResult } from "@effect-idempotency/core/IdempotencyAdmin"
import { parseRecordId, stateOf } from "@effect-idempotency/core/IdempotencyAdmin"
import type { StoreFailure } from "@effect-idempotency/core/IdempotencyError"
import { StoreError } from "@effect-idempotency/core/IdempotencyError"
import type { IdempotencyRecord } from "@effect-idempotency/core/IdempotencyRecord"
import * as Clock from "effect/Clock"
import * as Effect from "effect/Effect"
import * as Either from "effect/Either"
import * as Option from "effect/Option"
import type { Redis } from "ioredis"
import * as Scripts from "../RedisScripts.js"
import type { Connection } from "./connection.js"
import { toStoreFailure } from "./errors.js"
import { keyOf, keyPattern } from "./keys.js"
import type { Decoder, Kind } from "./replies.js"
import { checked, outcomeOf } from "./replies.js"

type Run = (key: string, args: ReadonlyArray<string>) => Effect.Effect<unknown, unknown>

/** @internal */
export interface Runtime {
  readonly connection: Connection
  readonly prefix: string
  /** In the keys `SCAN` returns, not in those scripts take. */
  readonly clientPrefix: string
  readonly send: <A, E>(
    method: string,
    run: Run,
    key: string,
    args: (now: string) => ReadonlyArray<string>,
    onReply: (reply: unknown) => Effect.Effect<A, E>
  ) => Effect.Effect<A, E | StoreFailure>
  readonly decoded: <A, B>(
    method: string,
    decode: Decoder<A>,
    f: (reply: A) => B
  ) => (reply: unknown) => Either.Either<B, StoreError>
  readonly method: <A, E>(name: string, effect: Effect.Effect<A, E>) => Effect.Effect<A, E | StoreError>
  readonly scan: (
    name: string,
    node: Redis,
    cursor: string,
    match: string,
    count: number
  ) => Effect.Effect<readonly [string, ReadonlyArray<string>], StoreFailure>
}

const SCAN_COUNT = 1000

const MAX_SCANS_PER_PAGE = 16

const READ_CONCURRENCY = 32

type InspectReply =
  | readonly [number]
  | readonly [number, IdempotencyRecord["status"], number, number, number, string, string, string, string]

const INSPECTED: ReadonlyArray<Kind> = [
  "integer",
  "status",
  "integer",
  "integer",
  "integer",
  "string",
  "string",
  "string",
  "string"
]

const decodeInspect: Decoder<InspectReply> = (reply) => {
  if (!Array.isArray(reply)) return Either.left("the reply of the inspect script is not an array")
  if (reply.length === 1) return checked("inspect", reply, ["integer"], 0)
  return checked("inspect", reply, INSPECTED, 0)
}

const REFUSALS: ReadonlySet<unknown> = new Set(["changed", "running", "completed", "omitted"])

const decodeUnblock: Decoder<UnblockResult> = (reply) => {
  if (!Array.isArray(reply)) return Either.left("the reply of the unblock script is not an array")
  if (reply.length === 1 && reply[0] === "unblocked") return Either.right({ _tag: "Unblocked" })
  if (reply.length === 1 && reply[0] === "absent") return Either.right({ _tag: "Refused", reason: "absent" })
  if (reply.length === 2 && REFUSALS.has(reply[0]) && Number.isSafeInteger(reply[1])) {
    return Either.right({
      _tag: "Refused",
      reason: reply[0] as "changed" | "running" | "completed" | "omitted",
      attempt: reply[1] as number
    })
  }
  return Either.left("the reply of the unblock script is not one it gives")
}

interface Inspected {
  readonly now: number
  readonly record: IdempotencyRecord | undefined
}

const inspected = (reply: InspectReply): Inspected =>
  reply.length === 1 ? { now: reply[0], record: undefined } : {
    now: reply[0],
    record: {
      status: reply[1],
      attempt: reply[2],
      leaseUntil: reply[3],
      expiresAt: reply[4],
      token: reply[6],
      fingerprint: reply[7],
      outcome: outcomeOf(reply[5], reply[8])
    }
  }

/** A `list` cursor: a master's index in `nodes`, its `SCAN` cursor, the last record id of a cut reply. */
interface Position {
  readonly node: number
  readonly cursor: string
  readonly after: string | undefined
}

const encodeCursor = (position: Position): string =>
  position.after === undefined
    ? `${position.node}:${position.cursor}`
    : `${position.node}:${position.cursor}:${position.after}`

const decodeCursor = (cursor: string | undefined): Either.Either<Position, string> => {
  if (cursor === undefined) return Either.right({ node: 0, cursor: "0", after: undefined })
  const match = /^(\d+):(\d+)(?::([\s\S]*))?$/.exec(cursor)
  return match === null
    ? Either.left("the cursor is not one the Redis store's list gave")
    : Either.right({ node: Number(match[1]), cursor: match[2]!, after: match[3] })
}

/** @internal */
export const make = (runtime: Runtime): AdminStore => {
  const { clientPrefix, connection, decoded, method, prefix, scan, send } = runtime
  const scripts = {
    inspect: connection.prepare(Scripts.inspect),
    unblock: connection.prepare(Scripts.unblock)
  }
  const keyStart = `${clientPrefix}${prefix}{`

  const idOf = (key: string): string | undefined =>
    key.startsWith(keyStart) && key.endsWith("}") ? key.slice(keyStart.length, -1) : undefined

  const inspect = (name: string, id: string, whole: boolean) =>
    send(
      name,
      scripts.inspect,
      keyOf(prefix, id),
      (now) => [now, whole ? "1" : "0"],
      decoded(name, decodeInspect, inspected)
    )

  // sorted by address, so that a cursor names the same node on the next call
  const nodes = (): ReadonlyArray<Redis> => {
    const all = connection.scanNodes()
    if (all.length <= 1) return all
    const address = (node: Redis) => `${node.options.host ?? ""}:${node.options.port ?? ""}`
    return [...all].sort((a, b) => address(a) < address(b) ? -1 : address(a) > address(b) ? 1 : 0)
  }

  const ready = (name: string) => Effect.mapError(connection.connected, toStoreFailure(name))

  const list: AdminStore["list"] = (query) =>
    method(
      "list",
      Effect.gen(function*() {
        const start = decodeCursor(query.cursor)
        if (Either.isLeft(start)) return yield* new StoreError({ method: "list", cause: start.left })
        yield* ready("list")
        const masters = nodes()
        const match = keyPattern(clientPrefix + prefix, query.operation)
        const count = Math.max(query.limit, SCAN_COUNT)
        const matches = (id: string, record: IdempotencyRecord, now: number) =>
          record.expiresAt > now &&
          (query.operation === undefined || parseRecordId(id).operation === query.operation) &&
          (query.state === undefined || stateOf(record, now) === query.state) &&
          (query.olderThanMillis === undefined || record.leaseUntil <= now - query.olderThanMillis)

        const found: Array<StoredRecord> = []
        let now: number | undefined
        let { after, cursor, node } = start.right
        let scans = 0
        while (node < masters.length && found.length < query.limit && scans < MAX_SCANS_PER_PAGE) {
          const [next, keys] = yield* scan("list", masters[node]!, cursor, match, count)
          scans++
          const ids = keys.flatMap((key) => {
            const id = idOf(key)
            return id === undefined || (after !== undefined && id <= after) ? [] : [id]
          }).sort()
          let last: number | undefined
          for (let i = 0; i < ids.length && found.length < query.limit; i += READ_CONCURRENCY) {
            const chunk = ids.slice(i, i + READ_CONCURRENCY)
            const reads = yield* Effect.forEach(chunk, (id) => inspect("list", id, true), {
              concurrency: READ_CONCURRENCY
            })
            for (let j = 0; j < reads.length && found.length < query.limit; j++) {
              const { now: at, record } = reads[j]!
              now = now === undefined ? at : Math.max(now, at)
              last = i + j
              if (record !== undefined && matches(chunk[j]!, record, at)) found.push({ recordId: chunk[j]!, record })
            }
          }
          if (last !== undefined && last < ids.length - 1) {
            after = ids[last]
            break
          }
          after = undefined
          if (next === "0") {
            node++
            cursor = "0"
          } else {
            cursor = next
          }
        }
        const pageNow = now ?? (yield* Clock.currentTimeMillis)
        // all are shown at the latest read: a lease that ended in between no longer counts as running
        const records = found.filter(({ record, recordId }) => matches(recordId, record, pageNow))
        return {
          records,
          now: pageNow,
          cursor: node < masters.length ? encodeCursor({ node, cursor, after }) : undefined
        }
      })
    )

  const read: AdminStore["read"] = (recordId) =>
    method(
      "read",
      Effect.map(inspect("read", recordId, true), ({ now, record }) => ({ record: Option.fromNullable(record), now }))
    )

  const unblock: AdminStore["unblock"] = (request) =>
    method(
      "unblock",
      send(
        "unblock",
        scripts.unblock,
        keyOf(prefix, request.recordId),
        (now) => [now, String(request.attempt)],
        decoded("unblock", decodeUnblock, (result) => result)
      )
    )

  const stats: AdminStore["stats"] = method(
    "stats",
    Effect.gen(function*() {
      yield* ready("stats")
      const match = keyPattern(clientPrefix + prefix)
      const counts = new Map<string, { operation: string; state: State; count: number }>()
      for (const node of nodes()) {
        let cursor = "0"
        do {
          const [next, keys] = yield* scan("stats", node, cursor, match, SCAN_COUNT)
          cursor = next
          const ids = keys.flatMap((key) => {
            const id = idOf(key)
            return id === undefined ? [] : [id]
          })
          const reads = yield* Effect.forEach(ids, (id) => inspect("stats", id, false), {
            concurrency: READ_CONCURRENCY
          })
          reads.forEach(({ now, record }, i) => {
            if (record === undefined) return
            const operation = parseRecordId(ids[i]!).operation
            const state = stateOf(record, now)
            const entry = counts.get(`${operation}\u0000${state}`)
            if (entry === undefined) counts.set(`${operation}\u0000${state}`, { operation, state, count: 1 })
            else entry.count++
          })
        } while (cursor !== "0")
      }
      return [...counts.values()] satisfies ReadonlyArray<Count>
    })
  )

  return { list, read, unblock, stats }
}
