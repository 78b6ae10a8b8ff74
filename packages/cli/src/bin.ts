#!/usr/bin/env node
/**
 * The `effect-idempotency` executable: runs `Cli.run` and exits with its code.
 *
 * @since 0.1.0
 */
import * as NodeContext from "@effect/platform-node/NodeContext"
import * as NodeRuntime from "@effect/platform-node/NodeRuntime"
import * as Effect from "effect/Effect"
import * as Exit from "effect/Exit"
import * as Cli from "./Cli.js"
import * as ExitCode from "./ExitCode.js"

Cli.run(process.argv).pipe(
  Effect.provide(NodeContext.layer),
  NodeRuntime.runMain({
    disableErrorReporting: true,
    disablePrettyLogger: true,
    teardown: (exit, onExit) => {
      const code = Exit.isSuccess(exit) && typeof exit.value === "number" ? exit.value : ExitCode.Internal
      process.exitCode = code
      // a client that keeps a handle open past its scope must not keep the process alive
      setTimeout(() => process.exit(code), 2000).unref()
      onExit(code)
    }
  })
)
