import type { ScanCommandOutput } from "@aws-sdk/client-dynamodb"
import {
  DeleteItemCommand,
  GetItemCommand,
  PutItemCommand,
  ScanCommand,
  UpdateItemCommand
} from "@aws-sdk/client-dynamodb"
import type { IdempotencyStore } from "@effect-idempotency/core"
import {
  IdempotencyAdmin,
  IdempotencyError,
  IdempotencyKey,
  IdempotencyRecord,
  Tracing
} from "@effect-idempotency/core"
import * as Clock from "effect/Clock"
import * as Duration from "effect/Duration"
import * as Effect from "effect/Effect"
import * as Either from "effect/Either"
import * as Option from "effect/Option"
import type { Fields } from "./expression.js"
import type { Item, Names } from "./item.js"
import { Attribute as A, completedItemBytes, decode, toTtlSeconds } from "./item.js"
import type { Sender } from "./send.js"
import { ConditionFailed, isItemTooLarge, send } from "./send.js"
import * as Statements from "./statements.js"
import { N, S } from "./statements.js"

type Store = IdempotencyStore.IdempotencyStore["Type"]
type AdminStore = IdempotencyAdmin.AdminStore
type Method = IdempotencyError.LeaseLost["method"]
type StoreFailure = IdempotencyError.StoreFailure

/** @internal */
export interface Config {
  readonly tableName: string
  readonly names: Names
  readonly sender: Sender
  readonly callTimeout: Duration.Duration
  readonly maxItemBytes: number
  readonly purgeMaxPages: number
}

const MAX_RESERVE_WRITES = 5
const DEFAULT_PURGE_LIMIT = 1000
const PURGE_CONCURRENCY = 8

/** @internal */
export const make = (config: Config): Store & { readonly [IdempotencyAdmin.AdminTypeId]: AdminStore } => {
  const { maxItemBytes, names, sender, tableName } = config
  const statements = Statements.make(names)
  const TableName = tableName
  const Key = (id: string): Item => ({ [names.key]: { S: id } })
  const callTimeout = Duration.toMillis(config.callTimeout)
  const deadlineFrom = (now: number): number => now + callTimeout
  const call = <A>(
    method: string,
    deadline: number,
    request: Parameters<typeof send<A>>[3]
  ): Effect.Effect<A | ConditionFailed, StoreFailure> => send(sender, method, deadline, request)

  const unconditional = <A>(
    method: string,
    effect: Effect.Effect<A | ConditionFailed, StoreFailure>
  ): Effect.Effect<A, StoreFailure> =>
    Effect.flatMap(
      effect,
      (result) =>
        result instanceof ConditionFailed
          ? Effect.fail(new IdempotencyError.StoreError({ method, cause: result }))
          : Effect.succeed(result)
    )

  const decodeItem = (method: string, item: Item) =>
    Either.mapLeft(decode(item), (cause) => new IdempotencyError.StoreError({ method, cause }))

  const atNow = <A, E>(f: (now: number) => Effect.Effect<A, E>): Effect.Effect<A, E> =>
    Effect.clockWith((clock) => f(clock.unsafeCurrentTimeMillis()))

  /** A write of the record of `request`, at the clock's time: that time, the calls' deadline and the record's id. */
  const atWrite = <A, E>(
    request: { readonly id: IdempotencyRecord.RecordId },
    f: (now: number, deadline: number, id: string) => Effect.Effect<A, E>
  ): Effect.Effect<A, E> => atNow((now) => f(now, deadlineFrom(now), request.id.value))

  const leaseLost = (method: Method, id: string) => new IdempotencyError.LeaseLost({ method, recordId: id })

  // no stack trace: it would point into this file, at a cost on every call
  const spanOptions = {
    attributes: { "db.system": "dynamodb", "aws.dynamodb.table_names": [tableName] },
    captureStackTrace: false
  }
  const span = (method: string) => Tracing.withSpan(`DynamoDbStore.${method}`, spanOptions)
  const spans = {
    reserve: span("reserve"),
    complete: span("complete"),
    markFailed: span("markFailed"),
    release: span("release"),
    extend: span("extend"),
    get: span("get"),
    purgeExpired: span("purgeExpired"),
    adminList: span("admin.list"),
    adminRead: span("admin.read"),
    adminUnblock: span("admin.unblock"),
    adminStats: span("admin.stats")
  }

  const read = (
    method: string,
    deadline: number,
    id: string
  ): Effect.Effect<Option.Option<IdempotencyRecord.IdempotencyRecord>, StoreFailure> =>
    unconditional(
      method,
      call(method, deadline, (client, abortSignal) =>
        client.send(new GetItemCommand({ TableName, Key: Key(id), ConsistentRead: true }), { abortSignal }))
    ).pipe(
      Effect.flatMap((output) =>
        output.Item === undefined
          ? Effect.succeed(Option.none())
          : Effect.map(decodeItem(method, output.Item), Option.some)
      )
    )

  const observed = (
    method: string,
    deadline: number,
    id: string,
    failure: ConditionFailed
  ): Effect.Effect<Option.Option<IdempotencyRecord.IdempotencyRecord>, StoreFailure> =>
    failure.item === undefined
      ? read(method, deadline, id)
      : Effect.map(decodeItem(method, failure.item), Option.some)

  const scanPage = (
    method: string,
    fields: Fields,
    startKey: Item | undefined,
    options?: { readonly Limit?: number; readonly ConsistentRead?: boolean }
  ): Effect.Effect<ScanCommandOutput, StoreFailure> =>
    Effect.flatMap(Clock.currentTimeMillis, (start) =>
      unconditional(
        method,
        call(method, deadlineFrom(start), (client, abortSignal) =>
          client.send(
            new ScanCommand({
              TableName,
              ...fields,
              ...options,
              ...(startKey === undefined ? {} : { ExclusiveStartKey: startKey })
            }),
            { abortSignal }
          ))
      ))

  const reserve: Store["reserve"] = (request) =>
    atWrite(request, (now, deadline, id) => {
      const lease = Duration.toMillis(request.lease)
      const leaseUntil = now + lease
      const expiresAt = now + Math.max(lease, Duration.toMillis(request.ttl))
      const reserved = (attempt: number) =>
        IdempotencyRecord.ReserveResult.Reserved({ token: request.token, attempt, leaseUntil, expiresAt })

      const claim = call("reserve", deadline, (client, abortSignal) =>
        client.send(
          new UpdateItemCommand({
            TableName,
            Key: Key(id),
            ...(request.takeover ? statements.claim.takeover : statements.claim.noTakeover)({
              now: N(now),
              token: S(request.token),
              fingerprint: S(request.fingerprint),
              leaseUntil: N(leaseUntil),
              expiresAt: N(expiresAt),
              ttl: N(toTtlSeconds(expiresAt))
            }),
            ReturnValues: "UPDATED_NEW",
            ReturnValuesOnConditionCheckFailure: "ALL_OLD"
          }),
          { abortSignal }
        )).pipe(
          Effect.flatMap((output): Effect.Effect<IdempotencyRecord.ReserveResult | ConditionFailed, StoreFailure> => {
            if (output instanceof ConditionFailed) return Effect.succeed(output)
            const attempt = Number(output.Attributes?.[A.attempt]?.N)
            return Number.isSafeInteger(attempt) && attempt > 0
              ? Effect.succeed(reserved(attempt))
              : Effect.fail(
                new IdempotencyError.StoreError({
                  method: "reserve",
                  cause: "the reservation returned no attempt number"
                })
              )
          })
        )

      const put = call("reserve", deadline, (client, abortSignal) =>
        client.send(
          new PutItemCommand({
            TableName,
            Item: {
              ...Key(id),
              [A.status]: { S: "IN_PROGRESS" },
              [A.token]: { S: request.token },
              [A.fingerprint]: { S: request.fingerprint },
              [A.attempt]: { N: "1" },
              [A.leaseUntil]: { N: String(leaseUntil) },
              [A.expiresAt]: { N: String(expiresAt) },
              [names.ttl]: { N: String(toTtlSeconds(expiresAt)) }
            },
            ...statements.recreate({ now: N(now) }),
            ReturnValuesOnConditionCheckFailure: "ALL_OLD"
          }),
          { abortSignal }
        )).pipe(Effect.map((output) => output instanceof ConditionFailed ? output : reserved(1)))

      const attemptWrite = (
        write: Effect.Effect<IdempotencyRecord.ReserveResult | ConditionFailed, StoreFailure>,
        writes: number
      ): Effect.Effect<IdempotencyRecord.ReserveResult, StoreFailure> =>
        Effect.flatMap(write, (result) => {
          if (!(result instanceof ConditionFailed)) return Effect.succeed(result)
          if (result.item === undefined) {
            return Effect.flatMap(read("reserve", deadline, id), (record) => decide(record, writes))
          }
          const record = decodeItem("reserve", result.item)
          return Either.isLeft(record) ? Effect.fail(record.left) : decide(Option.some(record.right), writes)
        })

      // bounded: the loop turns again only when the record changed between a write and a read
      const decide = (
        current: Option.Option<IdempotencyRecord.IdempotencyRecord>,
        writes: number
      ): Effect.Effect<IdempotencyRecord.ReserveResult, StoreFailure> => {
        let next: typeof claim
        if (Option.isNone(current)) {
          next = put
        } else {
          const record = current.value
          const live = IdempotencyRecord.isLive(record, now)
          if (live && record.status === "IN_PROGRESS" && record.token === request.token) {
            // this token's own reservation went through earlier (a retried request)
            return Effect.succeed(
              IdempotencyRecord.ReserveResult.Reserved({
                token: request.token,
                attempt: record.attempt,
                leaseUntil: record.leaseUntil,
                expiresAt: record.expiresAt
              })
            )
          }
          if (!live) next = put
          else if (IdempotencyRecord.canTakeOver(record, request, now)) next = claim
          else return Effect.succeed(IdempotencyRecord.ReserveResult.Existing({ record, now }))
        }
        return writes < MAX_RESERVE_WRITES
          ? attemptWrite(next, writes + 1)
          : Effect.fail(
            new IdempotencyError.StoreError({
              method: "reserve",
              cause: "the record kept changing during the reservation"
            })
          )
      }

      // PutItem first, measured: README.md#how-each-method-maps-to-dynamodb
      return attemptWrite(put, 1)
    }).pipe(spans.reserve)

  // a failed condition is `LeaseLost` unless the record shows the write applied (README.md#failures-and-retries)
  const fenced = <A>(
    method: Method,
    deadline: number,
    id: string,
    write: Effect.Effect<A | ConditionFailed, StoreFailure>,
    recognize?: {
      readonly always?: boolean
      readonly applied: (record: Option.Option<IdempotencyRecord.IdempotencyRecord>) => boolean
    }
  ): Effect.Effect<Option.Option<A>, IdempotencyError.LeaseLost | StoreFailure> =>
    Effect.flatMap(write, (result) => {
      if (!(result instanceof ConditionFailed)) return Effect.succeed(Option.some(result))
      return recognize === undefined || !(recognize.always === true || result.afterUncertainAttempt)
        ? Effect.fail(leaseLost(method, id))
        : Effect.flatMap(
          observed(method, deadline, id, result),
          (record) => recognize.applied(record) ? Effect.succeed(Option.none<A>()) : Effect.fail(leaseLost(method, id))
        )
    })

  const heldBy =
    (status: IdempotencyRecord.Status, token: string) =>
    (record: Option.Option<IdempotencyRecord.IdempotencyRecord>): boolean =>
      Option.exists(record, (record) => record.status === status && record.token === token)

  const updateRecord = (
    method: Method,
    deadline: number,
    id: string,
    fields: Fields,
    returnOld?: { readonly onSuccess?: boolean; readonly onConditionFailure?: boolean }
  ) =>
    call(method, deadline, (client, abortSignal) =>
      client.send(
        new UpdateItemCommand({
          TableName,
          Key: Key(id),
          ...fields,
          ...(returnOld?.onSuccess === true ? { ReturnValues: "ALL_OLD" } : {}),
          ...(returnOld?.onConditionFailure === true ? { ReturnValuesOnConditionCheckFailure: "ALL_OLD" } : {})
        }),
        { abortSignal }
      ))

  const complete: Store["complete"] = (request) =>
    atWrite(request, (now, deadline, id) => {
      const expiresAt = now + Duration.toMillis(request.ttl)
      const write = (outcome: IdempotencyRecord.StoredOutcome) => {
        const { body, kind } = IdempotencyRecord.outcomeToColumns(outcome)
        return updateRecord(
          "complete",
          deadline,
          id,
          statements.complete({
            now: N(now),
            token: S(request.token),
            kind: S(kind),
            body: S(body),
            expiresAt: N(expiresAt),
            ttl: N(toTtlSeconds(expiresAt))
          })
        )
      }
      const { body, kind } = IdempotencyRecord.outcomeToColumns(request.outcome)
      const bytes = completedItemBytes({ names, id, token: request.token, kind, body })
      const omitted = (reason: string) =>
        Effect.zipRight(
          Effect.logWarning(`idempotency: the outcome was not recorded: ${reason}`).pipe(
            Effect.annotateLogs({ table: tableName, recordId: id })
          ),
          write(IdempotencyRecord.StoredOutcome.Omitted({ reason }))
        )
      const tooLarge = `its item of about ${bytes} bytes exceeds DynamoDB's item size limit`
      // still COMPLETED, or a retry would execute again (README.md#the-400-kb-item-limit)
      const recorded = bytes > maxItemBytes
        ? omitted(`${tooLarge} (${maxItemBytes} bytes)`)
        : Effect.catchIf(
          write(request.outcome),
          (error): error is IdempotencyError.StoreError => error._tag === "StoreError" && isItemTooLarge(error.cause),
          () => omitted(`${tooLarge} (refused by DynamoDB)`)
        )
      return Effect.asVoid(
        fenced("complete", deadline, id, recorded, { applied: heldBy("COMPLETED", request.token) })
      )
    }).pipe(spans.complete)

  const markFailed: Store["markFailed"] = (request) =>
    atWrite(request, (now, deadline, id) => {
      const expiresAt = now + Duration.toMillis(request.ttl)
      return fenced(
        "markFailed",
        deadline,
        id,
        updateRecord(
          "markFailed",
          deadline,
          id,
          statements.markFailed({
            now: N(now),
            token: S(request.token),
            expiresAt: N(expiresAt),
            ttl: N(toTtlSeconds(expiresAt))
          })
        ),
        { applied: heldBy("FAILED", request.token) }
      )
    }).pipe(Effect.asVoid, spans.markFailed)

  const release: Store["release"] = (request) =>
    atWrite(request, (now, deadline, id) =>
      fenced(
        "release",
        deadline,
        id,
        call("release", deadline, (client, abortSignal) =>
          client.send(
            new DeleteItemCommand({
              TableName,
              Key: Key(id),
              ...statements.release({ now: N(now), token: S(request.token) })
            }),
            { abortSignal }
          )),
        { applied: Option.isNone }
      )).pipe(Effect.asVoid, spans.release)

  const extend: Store["extend"] = (request) =>
    atWrite(request, (now, deadline, id) =>
      Effect.gen(function*() {
        const leaseUntil = now + Duration.toMillis(request.lease)
        const lease = { now: N(now), token: S(request.token), leaseUntil: N(leaseUntil) }
        const written = yield* fenced(
          "extend",
          deadline,
          id,
          updateRecord("extend", deadline, id, statements.extendLease(lease), { onSuccess: true })
        )
        const previous = Option.flatMapNullable(written, (output) => output.Attributes)
        const old = Option.isNone(previous) ? undefined : yield* decodeItem("extend", previous.value)
        if (old === undefined || old.expiresAt >= leaseUntil) return
        // the same clock reading as the first write, so the record is as live as it was then
        yield* fenced(
          "extend",
          deadline,
          id,
          updateRecord(
            "extend",
            deadline,
            id,
            statements.extendExpiry({ ...lease, ttl: N(toTtlSeconds(leaseUntil)) }),
            { onConditionFailure: true }
          ),
          {
            // already moved at least as far (by a retried or a concurrent extend of this owner)
            always: true,
            applied: Option.exists((record) =>
              record.status === "IN_PROGRESS" && record.token === request.token && record.expiresAt >= leaseUntil
            )
          }
        )
      })).pipe(spans.extend)

  const get: Store["get"] = (id) =>
    Effect.flatMap(
      Clock.currentTimeMillis,
      (now) =>
        Effect.map(
          read("get", deadlineFrom(now), id.value),
          Option.filter((record) => IdempotencyRecord.isLive(record, now))
        )
    ).pipe(spans.get)

  const purgeExpired: Store["purgeExpired"] = (options) =>
    Effect.gen(function*() {
      const now = yield* Clock.currentTimeMillis
      const limit = options?.limit ?? DEFAULT_PURGE_LIMIT
      const request = <A>(send: Parameters<typeof call<A>>[2]) =>
        Effect.flatMap(Clock.currentTimeMillis, (start) => call("purgeExpired", deadlineFrom(start), send))
      const remove = (item: Item) => {
        const id = item[names.key]?.S
        if (id === undefined) return Effect.succeed(false)
        return request((client, abortSignal) =>
          client.send(
            new DeleteItemCommand({ TableName, Key: Key(id), ...statements.purgeDelete({ now: N(now) }) }),
            { abortSignal }
          )
        ).pipe(Effect.map((result) => !(result instanceof ConditionFailed)))
      }
      let deleted = 0
      let startKey: Item | undefined = undefined
      for (let page = 0; page < config.purgeMaxPages && deleted < limit; page++) {
        const output: ScanCommandOutput = yield* scanPage(
          "purgeExpired",
          statements.purgeScan({ now: N(now) }),
          startKey
        )
        const candidates = (output.Items ?? []).slice(0, limit - deleted)
        const results = yield* Effect.forEach(candidates, remove, { concurrency: PURGE_CONCURRENCY })
        deleted += results.filter((removed) => removed).length
        startKey = output.LastEvaluatedKey
        if (startKey === undefined) break
      }
      return deleted
    }).pipe(spans.purgeExpired)

  const cursorOf = (method: string, output: ScanCommandOutput): Effect.Effect<string | undefined, StoreFailure> => {
    if (output.LastEvaluatedKey === undefined) return Effect.succeed(undefined)
    const id = output.LastEvaluatedKey[names.key]?.S
    return id === undefined
      ? Effect.fail(new IdempotencyError.StoreError({ method, cause: "the scan returned a key without an id" }))
      : Effect.succeed(id)
  }

  const decodeAll = (method: string, items: ReadonlyArray<Item> | undefined) =>
    Effect.forEach(items ?? [], (item) => {
      const recordId = item[names.key]?.S
      return recordId === undefined
        ? Effect.fail(new IdempotencyError.StoreError({ method, cause: "an item without an id" }))
        : Effect.map(decodeItem(method, item), (record) => ({ recordId, record }))
    })

  const adminList: AdminStore["list"] = (query) =>
    Effect.gen(function*() {
      const now = yield* Clock.currentTimeMillis
      const prefix = query.operation === undefined
        ? ""
        : Either.getOrUndefined(Either.try(() => encodeURIComponent(query.operation!) + IdempotencyKey.SEPARATOR))
      // an operation that cannot be encoded (a lone surrogate) has no records
      if (prefix === undefined) return { records: [], now, cursor: undefined }
      const filter = statements.adminList({
        state: query.state,
        operation: query.operation !== undefined,
        olderThan: query.olderThanMillis !== undefined
      })
      const output = yield* scanPage(
        "admin.list",
        filter({ now: N(now), prefix: S(prefix), leaseEndedBy: N(now - (query.olderThanMillis ?? 0)) }),
        query.cursor === undefined ? undefined : Key(query.cursor),
        { Limit: query.limit, ConsistentRead: true }
      )
      return {
        records: yield* decodeAll("admin.list", output.Items),
        now,
        cursor: yield* cursorOf("admin.list", output)
      }
    }).pipe(spans.adminList)

  const adminRead: AdminStore["read"] = (recordId) =>
    Effect.flatMap(
      Clock.currentTimeMillis,
      (now) =>
        Effect.map(read("admin.read", deadlineFrom(now), recordId), (record) => ({
          record: Option.filter(record, (record) => IdempotencyRecord.isLive(record, now)),
          now
        }))
    ).pipe(spans.adminRead)

  const MAX_UNBLOCK_WRITES = 3

  const adminUnblock: AdminStore["unblock"] = ({ attempt, recordId }) =>
    Effect.gen(function*() {
      const now = yield* Clock.currentTimeMillis
      const deadline = deadlineFrom(now)
      for (let writes = 1;; writes++) {
        const result = yield* call("admin.unblock", deadline, (client, abortSignal) =>
          client.send(
            new DeleteItemCommand({
              TableName,
              Key: Key(recordId),
              ...statements.adminUnblock({ now: N(now), attempt: N(attempt) }),
              ReturnValuesOnConditionCheckFailure: "ALL_OLD"
            }),
            { abortSignal }
          ))
        if (!(result instanceof ConditionFailed)) return { _tag: "Unblocked" } as const
        const current = Option.filter(
          yield* observed("admin.unblock", deadline, recordId, result),
          (record) => IdempotencyRecord.isLive(record, now)
        )
        if (Option.isNone(current)) {
          return result.afterUncertainAttempt ? { _tag: "Unblocked" } as const : refused("absent")
        }
        const record = current.value
        if (record.attempt !== attempt) return refused("changed", record.attempt)
        const state = IdempotencyAdmin.stateOf(record, now)
        if (isRefusal(state)) return refused(state, record.attempt)
        if (writes === MAX_UNBLOCK_WRITES) {
          return yield* new IdempotencyError.StoreError({
            method: "admin.unblock",
            cause: "the record kept changing during the unblock"
          })
        }
      }
    }).pipe(spans.adminUnblock)

  const adminStats: AdminStore["stats"] = Effect.gen(function*() {
    const now = yield* Clock.currentTimeMillis
    const fields = statements.adminStats({ now: N(now) })
    const counts = new Map<string, { operation: string; state: IdempotencyAdmin.State; count: number }>()
    let startKey: Item | undefined = undefined
    do {
      const output: ScanCommandOutput = yield* scanPage("admin.stats", fields, startKey, { ConsistentRead: true })
      for (const { record, recordId } of yield* decodeAll("admin.stats", output.Items)) {
        const operation = IdempotencyAdmin.parseRecordId(recordId).operation
        const state = IdempotencyAdmin.stateOf(record, now)
        const key = `${operation}\u0000${state}`
        const entry = counts.get(key)
        if (entry === undefined) counts.set(key, { operation, state, count: 1 })
        else entry.count++
      }
      startKey = output.LastEvaluatedKey
    } while (startKey !== undefined)
    return Array.from(counts.values())
  }).pipe(spans.adminStats)

  const admin: AdminStore = { list: adminList, read: adminRead, unblock: adminUnblock, stats: adminStats }
  return { reserve, complete, release, markFailed, extend, get, purgeExpired, [IdempotencyAdmin.AdminTypeId]: admin }
}

type Refusal = Extract<IdempotencyAdmin.UnblockResult, { readonly _tag: "Refused" }>

const refused = (reason: Refusal["reason"], attempt?: number): IdempotencyAdmin.UnblockResult =>
  attempt === undefined ? { _tag: "Refused", reason } : { _tag: "Refused", reason, attempt }

const isRefusal = (state: IdempotencyAdmin.State): state is "running" | "completed" | "omitted" =>
  !IdempotencyAdmin.unblockable.has(state)
