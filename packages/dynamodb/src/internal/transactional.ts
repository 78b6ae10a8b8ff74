// The transactional mode's engine: README.md#transactional-mode-your-items-and-the-record-in-one-transactwriteitems
import type { TransactWriteItem } from "@aws-sdk/client-dynamodb"
import { GetItemCommand, TransactWriteItemsCommand } from "@aws-sdk/client-dynamodb"
import * as Attempt from "@effect-idempotency/core/Attempt"
import type { Request, Result } from "@effect-idempotency/core/Idempotency"
import { instrumented, retryOnConflict } from "@effect-idempotency/core/Idempotency"
import * as IdempotencyContext from "@effect-idempotency/core/IdempotencyContext"
import type { IdempotencyError, InvalidPayload, StoreFailure } from "@effect-idempotency/core/IdempotencyError"
import {
  DownstreamTimeout,
  IdempotencyConflict,
  OutcomeNotReplayable,
  StoreError,
  StoreUnavailable
} from "@effect-idempotency/core/IdempotencyError"
import * as IdempotencyKey from "@effect-idempotency/core/IdempotencyKey"
import type { FailurePolicy, InProgressPolicy, TimeoutPolicy } from "@effect-idempotency/core/IdempotencyPolicy"
import type { IdempotencyRecord } from "@effect-idempotency/core/IdempotencyRecord"
import { isLive, makeRecordId, outcomeToColumns, StoredOutcome } from "@effect-idempotency/core/IdempotencyRecord"
import type { OutcomeCodec } from "@effect-idempotency/core/OutcomeCodec"
import * as Deadlines from "@effect-idempotency/core/StoreDeadlines"
import * as Cause from "effect/Cause"
import * as Clock from "effect/Clock"
import * as Duration from "effect/Duration"
import * as Effect from "effect/Effect"
import * as Exit from "effect/Exit"
import * as Option from "effect/Option"
import * as Predicate from "effect/Predicate"
import type * as Schedule from "effect/Schedule"
import { DynamoDbClient } from "../DynamoDbClient.js"
import type { Item, Names } from "./item.js"
import { Attribute as A, completedItemBytes, decode, toTtlSeconds } from "./item.js"
import type { Sender } from "./send.js"
import { acceptsPlainSignals, ConditionFailed, send } from "./send.js"

/** @internal */
export interface Plan<A> {
  readonly writes: ReadonlyArray<TransactWriteItem>
  readonly value: A
}

/** @internal */
export type Rejection =
  | { readonly _tag: "ConditionFailed"; readonly index: number }
  | { readonly _tag: "TooManyWrites"; readonly count: number }
  | { readonly _tag: "RecordKey"; readonly index: number }

/** @internal */
export interface Definition<P, A, E, R> {
  readonly name: string
  readonly tableName: string
  readonly names: Names
  readonly fingerprint: (payload: P) => Effect.Effect<string, InvalidPayload>
  readonly codec: OutcomeCodec<A, unknown>
  readonly failurePolicy: (error: E) => FailurePolicy
  readonly ttl: Duration.Duration
  readonly timeout: Duration.Duration
  /** The time kept before the attempt's deadline (or after its timeout) for the transaction. */
  readonly margin: Duration.Duration
  readonly inProgress: InProgressPolicy | undefined
  readonly onTimeout: TimeoutPolicy
  readonly key: IdempotencyKey.Options | undefined
  readonly retry: Schedule.Schedule<unknown, unknown>
  readonly requestTimeout: Duration.Duration
  readonly callTimeout: Duration.Duration
  readonly maxItemBytes: number
  readonly rejected: (operation: string, key: string, rejection: Rejection) => unknown
  readonly plan: (payload: P) => Effect.Effect<Plan<A>, E, R>
}

/** @internal */
export const MAX_WRITES = 99

const MAX_ROUNDS = 3

type Sent = { readonly _tag: "Applied" } | { readonly _tag: "Cancelled"; readonly codes: ReadonlyArray<string> }

const cancellationCodes = (error: unknown): ReadonlyArray<string> | undefined => {
  if (!Predicate.hasProperty(error, "name") || error.name !== "TransactionCanceledException") return undefined
  const reasons = Predicate.hasProperty(error, "CancellationReasons") && Array.isArray(error.CancellationReasons)
    ? error.CancellationReasons as ReadonlyArray<unknown>
    : []
  return reasons.map((reason) =>
    Predicate.hasProperty(reason, "Code") && typeof reason.Code === "string" ? reason.Code : "None"
  )
}

const tableNameOf = (nameOrArn: string | undefined): string | undefined => {
  const arn = nameOrArn === undefined ? null : /^arn:[^:]+:dynamodb:[^:]*:[^:]*:table\/(.+)$/.exec(nameOrArn)
  return arn === null ? nameOrArn : arn[1]
}

const targetOf = (write: TransactWriteItem, keyAttribute: string) => {
  if (write.Put !== undefined) return { table: write.Put.TableName, key: write.Put.Item?.[keyAttribute] }
  const keyed = write.Update ?? write.Delete ?? write.ConditionCheck
  return keyed === undefined ? undefined : { table: keyed.TableName, key: keyed.Key?.[keyAttribute] }
}

// DynamoDB refuses two operations on one item with a `ValidationException`: refused before sending
const recordWriteIndex = (
  writes: ReadonlyArray<TransactWriteItem>,
  table: string,
  keyAttribute: string,
  id: string
): number =>
  writes.findIndex((write) => {
    const target = targetOf(write, keyAttribute)
    return target !== undefined && tableNameOf(target.table) === tableNameOf(table) && target.key?.S === id
  })

class Changed {
  readonly _tag = "Changed"
}

/** @internal */
export const make = <P, A, E, R>(def: Definition<P, A, E, R>) => {
  const { name, names, tableName } = def
  const ttlMs = Duration.toMillis(def.ttl)
  const callTimeoutMs = Duration.toMillis(def.callTimeout)
  const deadlines = Deadlines.make(Deadlines.tickFor(Duration.min(def.requestTimeout, def.callTimeout)))
  const senders = new WeakMap<object, Sender>()
  const senderOf = (client: DynamoDbClient["Type"]["client"]): Sender => {
    let sender = senders.get(client)
    if (sender === undefined) {
      sender = {
        client,
        retry: def.retry,
        requestTimeout: def.requestTimeout,
        plainSignals: acceptsPlainSignals(client),
        deadlines
      }
      senders.set(client, sender)
    }
    return sender
  }

  const runDetailed = (request: Request<P>): Effect.Effect<Result<A>, E | IdempotencyError, R | DynamoDbClient> =>
    Effect.gen(function*() {
      const sender = senderOf((yield* DynamoDbClient).client)
      const key = yield* IdempotencyKey.decode(request.key, def.key)
      const fingerprint = yield* def.fingerprint(request.payload)
      const id = makeRecordId({ operation: name, key, scope: request.scope })
      const start = yield* Clock.currentTimeMillis
      // the downstream ends a margin before the attempt's deadline, to record and commit
      const { end, timeoutMillis: timeoutMs, until } = yield* Attempt.window({
        operation: name,
        request,
        timeout: def.timeout,
        margin: def.margin,
        now: start
      })
      if (timeoutMs <= 0) {
        return yield* Effect.fail(
          new DownstreamTimeout({ operation: name, key, timeoutMillis: 0, policy: "release", replayed: false })
        )
      }
      const recordKey: Item = { [names.key]: { S: id.value } }

      const call = <X>(method: string, request: Parameters<typeof send<X>>[3]) =>
        Effect.flatMap(
          Clock.currentTimeMillis,
          (now) => send(sender, method, Math.min(now + callTimeoutMs, end), request)
        )

      const read: Effect.Effect<Option.Option<IdempotencyRecord>, StoreFailure> = Effect.flatMap(
        call("get", (client, abortSignal) =>
          client.send(
            new GetItemCommand({ TableName: tableName, Key: recordKey, ConsistentRead: true }),
            { abortSignal }
          )),
        (output): Effect.Effect<Option.Option<IdempotencyRecord>, StoreFailure> => {
          if (output instanceof ConditionFailed || output.Item === undefined) return Effect.succeed(Option.none())
          const record = decode(output.Item)
          return record._tag === "Left"
            ? Effect.fail(new StoreError({ method: "get", cause: record.left }))
            : Effect.succeed(Option.some(record.right))
        }
      )

      const recordWrite = (
        seen: Option.Option<IdempotencyRecord>,
        token: string,
        attempt: number,
        now: number,
        status: "COMPLETED" | "FAILED",
        outcome: StoredOutcome | undefined
      ): TransactWriteItem => {
        const expiresAt = now + ttlMs
        const item: Item = {
          ...recordKey,
          [A.status]: { S: status },
          [A.token]: { S: token },
          [A.fingerprint]: { S: fingerprint },
          [A.attempt]: { N: String(attempt) },
          [A.leaseUntil]: { N: String(now) },
          [A.expiresAt]: { N: String(expiresAt) },
          [names.ttl]: { N: String(toTtlSeconds(expiresAt)) }
        }
        if (outcome !== undefined) {
          let { body, kind } = outcomeToColumns(outcome)
          if (completedItemBytes({ names, id: id.value, token, kind, body }) > def.maxItemBytes) {
            ;({ body, kind } = outcomeToColumns(StoredOutcome.Omitted({ reason: "too large to record" })))
          }
          item[A.outcomeKind] = { S: kind }
          item[A.outcomeBody] = { S: body }
        }
        const values: Item = { ":now": { N: String(now) } }
        let condition: string
        let attributes: Record<string, string>
        if (Option.isNone(seen) || !isLive(seen.value, now)) {
          // no record, or only an expired one that DynamoDB has not deleted yet
          condition = "attribute_not_exists(#pk) OR #expires <= :now"
          attributes = { "#pk": names.key, "#expires": A.expiresAt }
        } else {
          // the record read, taken over: the same version, and still FAILED or past its lease
          condition = "#token = :token AND #attempt = :attempt AND #expires > :now AND " +
            "(#status = :failed OR (#status = :inProgress AND #lease <= :now))"
          attributes = {
            "#token": A.token,
            "#attempt": A.attempt,
            "#expires": A.expiresAt,
            "#status": A.status,
            "#lease": A.leaseUntil
          }
          values[":token"] = { S: seen.value.token }
          values[":attempt"] = { N: String(seen.value.attempt) }
          values[":failed"] = { S: "FAILED" }
          values[":inProgress"] = { S: "IN_PROGRESS" }
        }
        return {
          Put: {
            TableName: tableName,
            Item: item,
            ConditionExpression: condition,
            ExpressionAttributeNames: attributes,
            ExpressionAttributeValues: values
          }
        }
      }

      const transact = (token: string, items: ReadonlyArray<TransactWriteItem>): Effect.Effect<Sent, StoreFailure> =>
        call("transaction", (client, abortSignal) =>
          client.send(
            new TransactWriteItemsCommand({ TransactItems: [...items], ClientRequestToken: token }),
            { abortSignal }
          ).then(
            (): Sent => ({ _tag: "Applied" }),
            (error: unknown): Sent => {
              const codes = cancellationCodes(error)
              if (codes === undefined) throw error
              return { _tag: "Cancelled", codes }
            }
          )).pipe(
            Effect.flatMap((sent) =>
              sent instanceof ConditionFailed
                ? Effect.fail(new StoreError({ method: "transaction", cause: "an unexpected condition failure" }))
                : Effect.succeed(sent)
            )
          )

      const conflict = (retryAfterMillis: number) =>
        new IdempotencyConflict({ operation: name, key, retryAfterMillis: Math.max(0, retryAfterMillis) })

      const cancelled = (codes: ReadonlyArray<string>): Effect.Effect<never, Changed | StoreFailure | unknown> => {
        if (codes[0] === "ConditionalCheckFailed" || codes[0] === "TransactionConflict") {
          return Effect.fail(new Changed())
        }
        const index = codes.findIndex((code, i) => i > 0 && code === "ConditionalCheckFailed")
        if (index > 0) return Effect.fail(def.rejected(name, key, { _tag: "ConditionFailed", index: index - 1 }))
        return Effect.fail(
          new StoreUnavailable({ method: "transaction", cause: `the transaction was cancelled (${codes.join(", ")})` })
        )
      }

      const commit = <X, Y>(
        token: string,
        items: ReadonlyArray<TransactWriteItem>,
        then: Effect.Effect<X, Y>
      ): Effect.Effect<X, Y | Changed | StoreFailure | unknown> =>
        Effect.flatMap(transact(token, items), (sent) => sent._tag === "Applied" ? then : cancelled(sent.codes))

      const round: Effect.Effect<Result<A>, E | IdempotencyError | Changed | unknown, R> = Effect.gen(function*() {
        const seen = yield* read
        const now = yield* Clock.currentTimeMillis
        let attempt = 1
        if (Option.isSome(seen) && isLive(seen.value, now)) {
          const found = Attempt.found({
            operation: name,
            key,
            fingerprint,
            record: seen.value,
            now,
            onTimeout: def.onTimeout,
            timeoutMillis: timeoutMs
          })
          switch (found._tag) {
            case "KeyReused":
            case "Conflict":
            case "Unknown":
              return yield* Effect.fail(found.error)
            case "Replay":
              return yield* def.codec.replay(found.record, { key, timeoutMillis: timeoutMs }) as Effect.Effect<
                Result<A>,
                E | IdempotencyError
              >
            case "Free":
              attempt = found.record.attempt + 1
          }
        }
        const token = globalThis.crypto.randomUUID()
        const context = IdempotencyContext.make({ id, token, attempt })
        const planned = Effect.suspend(() => def.plan(request.payload)).pipe(
          Effect.provideService(IdempotencyContext.IdempotencyContext, context)
        )
        const left = until - (yield* Clock.currentTimeMillis)
        const exit = yield* Effect.timeoutOption(Effect.exit(planned), Duration.millis(Math.max(0, left)))
        if (Option.isNone(exit)) {
          return yield* Effect.fail(
            new DownstreamTimeout({
              operation: name,
              key,
              timeoutMillis: timeoutMs,
              policy: "release",
              replayed: false,
              rolledBack: true
            })
          )
        }
        const writtenAt = yield* Clock.currentTimeMillis
        if (Exit.isSuccess(exit.value)) {
          const { value, writes } = exit.value.value
          if (writes.length > MAX_WRITES) {
            return yield* Effect.fail(def.rejected(name, key, { _tag: "TooManyWrites", count: writes.length }))
          }
          const onRecord = recordWriteIndex(writes, tableName, names.key, id.value)
          if (onRecord >= 0) return yield* Effect.fail(def.rejected(name, key, { _tag: "RecordKey", index: onRecord }))
          const encoded = yield* def.codec.encodeSuccess(value)
          const items = [recordWrite(seen, token, attempt, writtenAt, "COMPLETED", encoded.outcome), ...writes]
          return yield* commit(
            token,
            items,
            encoded._tag === "Encoded"
              ? Effect.succeed<Result<A>>({ value: encoded.value, replayed: false, attempt, recorded: true })
              : Effect.fail(new OutcomeNotReplayable({ operation: name, key, reason: encoded.reason, replayed: false }))
          )
        }
        const cause = exit.value.cause
        const failure = Cause.failureOption(cause)
        // a defect or an interruption: nothing was written
        if (Option.isNone(failure)) return yield* Effect.failCause(cause)
        const policy = yield* Effect.try({ try: () => def.failurePolicy(failure.value), catch: (thrown) => thrown })
          .pipe(Effect.catchAll((thrown) => Effect.failCause(Cause.sequential(cause, Cause.die(thrown)))))
        switch (policy) {
          case "release":
            return yield* Effect.failCause(cause)
          case "markFailed":
            return yield* commit(
              token,
              [recordWrite(seen, token, attempt, writtenAt, "FAILED", undefined)],
              Effect.failCause(cause)
            )
          case "store": {
            const outcome = yield* def.codec.encodeFailure(failure.value)
            return yield* commit(
              token,
              [recordWrite(seen, token, attempt, writtenAt, "COMPLETED", outcome)],
              Effect.failCause(cause)
            )
          }
        }
      })

      const rounds = (n: number): Effect.Effect<Result<A>, E | IdempotencyError | unknown, R> =>
        Effect.catchIf(
          round,
          (error): error is Changed => error instanceof Changed,
          () => n < MAX_ROUNDS ? rounds(n + 1) : Effect.fail(conflict(0))
        )

      const inProgress = def.inProgress
      return yield* (inProgress === undefined || inProgress._tag === "Fail"
        ? rounds(1)
        : retryOnConflict(rounds(1), inProgress.schedule, until)) as Effect.Effect<Result<A>, E | IdempotencyError, R>
    }).pipe(instrumented(name, request.key))

  return { runDetailed }
}
