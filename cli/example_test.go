package cli_test

import (
	"bytes"
	"context"
	"fmt"

	"github.com/vigil-run/vigil/cli"
)

// ExampleNew runs the command tree as main does, with its own writers.
func ExampleNew() {
	var stdout, stderr bytes.Buffer
	cmd := cli.New(&stdout, &stderr)
	cmd.SetArgs([]string{"wait"})
	err := cmd.ExecuteContext(context.Background())
	fmt.Print(stderr.String())
	fmt.Println("exit code", cli.ExitCode(err))
	// Output:
	// vigil: accepts 1 arg(s), received 0
	// exit code 2
}
