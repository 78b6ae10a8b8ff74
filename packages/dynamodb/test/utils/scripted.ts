/**
 * A client that answers from a script instead of the network: every request the store sends is
 * recorded (its command, its input, its abort signal) and answered by `respond`. For what the
 * endpoints cannot show: the exact text of each request, how many attempts a call made and how
 * often the retry schedule was consulted, and items no endpoint would return.
 */
import type { DynamoDBClient } from "@aws-sdk/client-dynamodb"
import {
  ConditionalCheckFailedException,
  DeleteItemCommand,
  GetItemCommand,
  PutItemCommand,
  ScanCommand,
  ThrottlingException,
  UpdateItemCommand
} from "@aws-sdk/client-dynamodb"
import type { IdempotencyStore } from "@effect-idempotency/core"
import { IdempotencyRecord } from "@effect-idempotency/core"
import { DynamoDbClient, DynamoDbStore } from "@effect-idempotency/dynamodb"
import * as Duration from "effect/Duration"
import * as Effect from "effect/Effect"
import * as Schedule from "effect/Schedule"

/** A request as the store sent it. */
export interface Sent {
  readonly command: "UpdateItem" | "PutItem" | "DeleteItem" | "GetItem" | "Scan" | "other"
  readonly input: Readonly<Record<string, unknown>>
  readonly signal: AbortSignal | PlainSignalLike | undefined
}

/** The SDK's own signal interface, as the store hands it to the SDK's Node handlers. */
export interface PlainSignalLike {
  readonly aborted: boolean
  onabort: ((this: unknown) => unknown) | null
}

/** Calls `f` when the request's signal aborts, whichever kind of signal the store gave it. */
export const onAbort = (sent: Sent, f: () => void): void => {
  const signal = sent.signal
  if (signal === undefined) return
  if ("addEventListener" in signal) signal.addEventListener("abort", f)
  else signal.onabort = f
}

/** Stands for the SDK's Node HTTP handler: the store then hands each request a plain signal. */
class NodeHttpHandler {}

const commandName = (command: unknown): Sent["command"] =>
  command instanceof UpdateItemCommand
    ? "UpdateItem"
    : command instanceof PutItemCommand
    ? "PutItem"
    : command instanceof DeleteItemCommand
    ? "DeleteItem"
    : command instanceof GetItemCommand
    ? "GetItem"
    : command instanceof ScanCommand
    ? "Scan"
    : "other"

/** Answers every request with an empty success, except a reservation, which gets attempt 1. */
export const succeed = (sent: Sent): Promise<unknown> =>
  Promise.resolve(sent.input.ReturnValues === "UPDATED_NEW" ? { Attributes: { attempt: { N: "1" } } } : {})

/**
 * A record's item as the table holds it (the store's attribute names, DynamoDB's attribute values):
 * `status` and `token` as given; by default fingerprint `sha256:x`, attempt 1, and a lease and a TTL
 * of 30 seconds and an hour from the clock time 1000.
 */
export const item = (
  id: IdempotencyRecord.RecordId,
  record:
    & Pick<IdempotencyRecord.IdempotencyRecord, "status" | "token">
    & Partial<Pick<IdempotencyRecord.IdempotencyRecord, "fingerprint" | "attempt" | "leaseUntil" | "expiresAt">>
) => ({
  id: { S: id.value },
  status: { S: record.status },
  token: { S: record.token },
  fingerprint: { S: record.fingerprint ?? "sha256:x" },
  attempt: { N: String(record.attempt ?? 1) },
  lease_until: { N: String(record.leaseUntil ?? 31_000) },
  expires_at: { N: String(record.expiresAt ?? 3_601_000) }
})

/**
 * Calls every store method once, in the order the requests tests read: the reservations `first` then
 * `second`, then on `first`'s id and token a completion (`{"ok":true}`, an hour), a FAILED mark (an
 * hour), an extension (2 hours), a release and a read; and a purge.
 */
export const callEveryMethod = (
  store: IdempotencyStore.IdempotencyStore["Type"],
  first: IdempotencyStore.ReserveRequest,
  second: IdempotencyStore.ReserveRequest
) =>
  Effect.gen(function*() {
    const { id, token } = first
    yield* store.reserve(first)
    yield* store.reserve(second)
    yield* store.complete({
      id,
      token,
      outcome: IdempotencyRecord.StoredOutcome.Success({ value: "{\"ok\":true}" }),
      ttl: Duration.hours(1)
    })
    yield* store.markFailed({ id, token, ttl: Duration.hours(1) })
    yield* store.extend({ id, token, lease: Duration.hours(2) })
    yield* store.release({ id, token })
    yield* store.get(id)
    yield* store.purgeExpired()
  })

/** Replaces an expression's placeholders by what they stand for: `#n0` by its name, `:now` by its value's text. */
export const resolve = (sent: Sent, field: string): string => {
  const names = (sent.input.ExpressionAttributeNames ?? {}) as Record<string, string>
  const values = (sent.input.ExpressionAttributeValues ?? {}) as Record<string, { S?: string; N?: string }>
  return String(sent.input[field]).replace(/#\w+/g, (placeholder) => names[placeholder] ?? `?${placeholder}`).replace(
    /:\w+/g,
    (placeholder) => {
      const value = values[placeholder]
      return value === undefined ? `?${placeholder}` : value.S !== undefined ? `'${value.S}'` : String(value.N)
    }
  )
}

/** DynamoDB's answer to a failed condition, with the item as it was (`ALL_OLD`) when given. */
export const conditionFailed = (item?: Record<string, unknown>): Error =>
  new ConditionalCheckFailedException({
    message: "The conditional request failed",
    $metadata: { httpStatusCode: 400 },
    ...(item === undefined ? {} : { Item: item as never })
  })

export const throttled = (): Error =>
  new ThrottlingException({ message: "Throughput exceeds the limit", $metadata: { httpStatusCode: 400 } })

/** The connection dropped after the request was sent: it may have been applied. */
export const connectionReset = (): Error => Object.assign(new Error("socket hang up"), { code: "ECONNRESET" })

/** The connection was refused: the request was never sent. */
export const connectionRefused = (): Error =>
  Object.assign(new Error("connect ECONNREFUSED 127.0.0.1:1"), { code: "ECONNREFUSED" })

/**
 * A store on a scripted client. `respond` gets each request and its number (from 1). The retry
 * schedule retries at once, at most `retries` times (default 3), and counts how often it was
 * consulted (`scheduleSteps`).
 */
export const scriptedStore = (
  respond: (sent: Sent, n: number) => Promise<unknown>,
  options?: Partial<DynamoDbStore.Options> & {
    readonly retries?: number | undefined
    /** Whether the client looks like one with the SDK's Node handler. Default false. */
    readonly nodeHandler?: boolean | undefined
  }
): Effect.Effect<{
  readonly store: IdempotencyStore.IdempotencyStore["Type"]
  readonly sent: ReadonlyArray<Sent>
  readonly scheduleSteps: () => number
}> => {
  const sent: Array<Sent> = []
  const steps = { count: 0 }
  const client = {
    ...(options?.nodeHandler === true ? { config: { requestHandler: new NodeHttpHandler() } } : {}),
    send: (command: unknown, sendOptions?: { readonly abortSignal?: Sent["signal"] }) => {
      const request: Sent = {
        command: commandName(command),
        input: (command as { readonly input: Record<string, unknown> }).input,
        signal: sendOptions?.abortSignal
      }
      sent.push(request)
      return respond(request, sent.length)
    }
  }
  const { nodeHandler: _, retries, ...storeOptions } = options ?? {}
  const retrySchedule = Schedule.recurs(retries ?? 3).pipe(
    Schedule.tapInput(() => Effect.sync(() => steps.count++))
  )
  return DynamoDbStore.make({ tableName: "scripted", retrySchedule, ...storeOptions }).pipe(
    Effect.provideService(
      DynamoDbClient.DynamoDbClient,
      DynamoDbClient.DynamoDbClient.of({ client: client as unknown as DynamoDBClient })
    ),
    Effect.map((store) => ({ store, sent, scheduleSteps: () => steps.count }))
  )
}
