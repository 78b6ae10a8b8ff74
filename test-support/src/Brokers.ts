/**
 * The message brokers of the queue tests: the RabbitMQ server `TEST_AMQP_URL` names, else a
 * `rabbitmq-server` node of the run's own on free loopback ports, in a folder of its own, stopped at
 * the end; the NATS server of `TEST_NATS_URL`, else a `nats-server -js` of the run's own. A broker
 * that cannot be had fails with what to install; nothing is skipped.
 */
import * as Effect from "effect/Effect"
import type * as Scope from "effect/Scope"
import { execFileSync } from "node:child_process"
import * as fs from "node:fs"
import * as net from "node:net"
import * as os from "node:os"
import * as path from "node:path"
import { freePort, requireExecutable, ServerError, spawn } from "./Servers.js"

const configured = (name: string): string | undefined => process.env[name] === "" ? undefined : process.env[name]

/** Whether something accepts TCP connections on `port` of 127.0.0.1 (fails if not). */
export const accepts = (port: number, host = "127.0.0.1"): Effect.Effect<void, ServerError> =>
  Effect.async<void, ServerError>((resume) => {
    const socket = net.connect({ port, host })
    socket.once("connect", () => {
      socket.destroy()
      resume(Effect.void)
    })
    socket.once(
      "error",
      (cause) => resume(Effect.fail(new ServerError({ message: `nothing answers on ${port}`, cause })))
    )
    return Effect.sync(() => socket.destroy())
  })

/** A loopback URL from `variable`, checked to answer. */
const fromVariable = (variable: string, url: string, defaultPort: number) =>
  Effect.gen(function*() {
    const parsed = new URL(url)
    if (parsed.hostname !== "127.0.0.1" && parsed.hostname !== "localhost") {
      return yield* new ServerError({ message: `${variable} must name a loopback server, not ${parsed.hostname}` })
    }
    yield* accepts(Number(parsed.port === "" ? defaultPort : parsed.port)).pipe(
      Effect.mapError((cause) => new ServerError({ message: `${variable}=${url}: no server answers there`, cause }))
    )
    return url
  })

/** The uid and gid of a user, or undefined where there is none. */
const userIds = (user: string): { readonly uid: number; readonly gid: number } | undefined => {
  try {
    const uid = Number(execFileSync("id", ["-u", user], { encoding: "utf8" }).trim())
    const gid = Number(execFileSync("id", ["-g", user], { encoding: "utf8" }).trim())
    return Number.isInteger(uid) && Number.isInteger(gid) ? { uid, gid } : undefined
  } catch {
    return undefined
  }
}

const RABBITMQ_MISSING =
  "No RabbitMQ for the tests: set TEST_AMQP_URL (amqp://guest:guest@127.0.0.1:5672), or install rabbitmq-server (Debian: apt install rabbitmq-server)"

/**
 * A RabbitMQ node of the run's own: its own name, AMQP and distribution ports and data folder, so
 * it runs beside the machine's. Run as root, the server script runs the node as user `rabbitmq`,
 * which must own the folder.
 */
export const rabbitMqServer: Effect.Effect<string, ServerError, Scope.Scope> = Effect.gen(function*() {
  const binary = yield* requireExecutable(["rabbitmq-server"], RABBITMQ_MISSING, {
    after: ["/usr/sbin", "/usr/lib/rabbitmq/bin"]
  })
  const ctl = path.join(path.dirname(binary), "rabbitmqctl")
  const port = yield* freePort
  const distPort = yield* freePort
  const node = `idem${port}@localhost`
  const dir = yield* Effect.acquireRelease(
    Effect.sync(() => fs.mkdtempSync(path.join(os.tmpdir(), "idem-rabbitmq-"))),
    (dir) => Effect.sync(() => fs.rmSync(dir, { recursive: true, force: true }))
  )
  for (const sub of ["mnesia", "log"]) fs.mkdirSync(path.join(dir, sub))
  const owner = process.getuid?.() === 0 ? userIds("rabbitmq") : undefined
  if (owner !== undefined) {
    for (const sub of ["", "mnesia", "log"]) fs.chownSync(path.join(dir, sub), owner.uid, owner.gid)
  }
  const env = {
    RABBITMQ_NODENAME: node,
    RABBITMQ_NODE_IP_ADDRESS: "127.0.0.1",
    RABBITMQ_NODE_PORT: String(port),
    RABBITMQ_DIST_PORT: String(distPort),
    RABBITMQ_MNESIA_BASE: path.join(dir, "mnesia"),
    RABBITMQ_LOG_BASE: path.join(dir, "log"),
    RABBITMQ_ENABLED_PLUGINS_FILE: path.join(dir, "enabled_plugins"),
    RABBITMQ_CONFIG_FILE: path.join(dir, "rabbitmq"),
    RABBITMQ_PID_FILE: path.join(dir, "pid"),
    RABBITMQ_FEATURE_FLAGS_FILE: path.join(dir, "feature_flags")
  }
  yield* spawn({
    name: "rabbitmq-server",
    command: "/usr/bin/env",
    args: [...Object.entries(env).map(([name, value]) => `${name}=${value}`), binary],
    ready: accepts(port),
    interval: "250 millis",
    timeout: "90 seconds",
    grace: "20 seconds"
  })
  // the server script hands the node to processes of its own, which a signal to the script does not
  // reach: rabbitmqctl stops the node, before the script is signalled and the folder removed
  yield* Effect.addFinalizer(() =>
    Effect.sync(() => {
      try {
        execFileSync(ctl, ["-n", node, "stop"], { stdio: "ignore", timeout: 30_000 })
      } catch {
        // the node is gone already
      }
    })
  )
  return `amqp://guest:guest@127.0.0.1:${port}`
})

/** The run's RabbitMQ: `TEST_AMQP_URL`, else a node started here. */
export const rabbitMq: Effect.Effect<{ readonly url: string; readonly started: boolean }, ServerError, Scope.Scope> =
  Effect.suspend((): Effect.Effect<{ readonly url: string; readonly started: boolean }, ServerError, Scope.Scope> => {
    const url = configured("TEST_AMQP_URL")
    return url !== undefined
      ? Effect.map(fromVariable("TEST_AMQP_URL", url, 5672), (url) => ({ url, started: false }))
      : Effect.map(rabbitMqServer, (url) => ({ url, started: true }))
  })

const NATS_MISSING =
  "No NATS server for the tests: set TEST_NATS_URL (nats://127.0.0.1:4222, JetStream on), or install nats-server (Debian: apt install nats-server)"

/**
 * The run's NATS server with JetStream: `TEST_NATS_URL`, else a `nats-server -js` on a free loopback
 * port with a temporary store, removed when the scope closes. `ready` says when a URL answers (a TCP
 * accept by default; a client's connection is a stricter check).
 */
export const nats = (
  ready: (url: string) => Effect.Effect<void, ServerError> = (url) => accepts(Number(new URL(url).port))
): Effect.Effect<{ readonly url: string; readonly started: boolean }, ServerError, Scope.Scope> =>
  Effect.gen(function*() {
    const url = configured("TEST_NATS_URL")
    if (url !== undefined) {
      const parsed = new URL(url)
      if (parsed.hostname !== "127.0.0.1" && parsed.hostname !== "localhost") {
        return yield* new ServerError({ message: `TEST_NATS_URL must name a loopback server, not ${parsed.hostname}` })
      }
      yield* ready(url).pipe(
        Effect.timeoutFail({
          duration: "10 seconds",
          onTimeout: () => new ServerError({ message: `TEST_NATS_URL=${url}: no NATS server answers there` })
        }),
        Effect.mapError((cause) =>
          new ServerError({ message: `TEST_NATS_URL=${url}: no NATS server answers there`, cause })
        )
      )
      return { url, started: false }
    }
    const binary = yield* requireExecutable(["nats-server"], NATS_MISSING, {
      variable: "NATS_SERVER",
      after: ["/usr/sbin", "/usr/local/sbin"]
    })
    const port = yield* freePort
    const dir = yield* Effect.acquireRelease(
      Effect.sync(() => fs.mkdtempSync(path.join(os.tmpdir(), "nats-js-"))),
      (dir) => Effect.sync(() => fs.rmSync(dir, { recursive: true, force: true }))
    )
    const started = `nats://127.0.0.1:${port}`
    yield* spawn({
      name: "nats-server",
      command: binary,
      args: ["-js", "-a", "127.0.0.1", "-p", String(port), "-sd", dir],
      ready: ready(started),
      timeout: "20 seconds",
      onProcessExit: () => fs.rmSync(dir, { recursive: true, force: true })
    })
    return { url: started, started: true }
  })
