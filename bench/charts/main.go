// Command charts draws the SVG charts of docs/BENCHMARKS.md from the JSON
// results bench/peers writes with -out:
//
//	cd bench
//	go run ./peers -scenario storm -runs 3 -out results/storm.json
//	go run ./charts -in results -out ../docs/bench
//
// It reads every *.json in -in and writes, for each scenario it finds:
// lateness-spread.svg and lateness-storm.svg (box plots of each wait's
// lateness, per peer), storm-drain.svg (waits settled against time since
// the instant they were all due, a line per peer), register.svg
// (registrations per second per peer and client count), batch.svg
// (waits per second registered in batches) and idle-cpu.svg (CPU per
// minute with every wait pending and none due).
package main

import (
	"flag"
	"fmt"
	"log"
	"os"

	"github.com/vigil-run/vigil/bench/internal/charts"
)

func main() {
	in := flag.String("in", "results", "folder of results files (*.json) written by bench/peers -out")
	out := flag.String("out", "../docs/bench", "folder to write the SVG charts into")
	flag.Parse()
	log.SetFlags(0)
	log.SetPrefix("charts: ")
	written, err := charts.Render(*in, *out)
	if err != nil {
		log.Fatal(err)
	}
	if len(written) == 0 {
		log.Fatalf("no results in %s/*.json to chart", *in)
	}
	for _, name := range written {
		fmt.Fprintln(os.Stdout, name)
	}
}
