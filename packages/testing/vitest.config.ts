import { defineProject, mergeConfig } from "vitest/config"
import shared from "../../vitest.shared.js"

export default mergeConfig(
  shared,
  defineProject({
    test: {
      name: "testing",
      // added to the shared `test/**/*.test.ts`: the example users copy is a test file too
      include: ["examples/**/*.test.ts"],
      // DynamoDB Local (when Java is found; required in CI) and dynalite, started as the DynamoDB
      // store's own tests start them, for the retry property on the real stores
      globalSetup: ["../dynamodb/test/globalSetup.ts"]
    }
  })
)
