package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"log/slog"
)

// doctorCmd is crux doctor [--repair]: lists the records of the store that
// cannot be read (and the index entries naming them or naming nothing) and
// checks every tenant's receipt chain; with --repair it first removes, in
// one transaction, what store.Repair can remove, printing each removal
// (see host.doctor). It creates no server, so nothing seeds or purges for
// it. It returns a reportedError, for status 1, when problems remain.
func doctorCmd(ctx context.Context, args []string, stdout io.Writer, osenv *environment, logger *slog.Logger) error {
	var repair bool
	s, pos, err := operatorFlags("doctor", args, osenv, func(fs *flag.FlagSet) {
		fs.BoolVar(&repair, "repair", false, "remove the unreadable facts and the index entries naming them")
	})
	if err != nil {
		return err
	}
	if len(pos) > 0 {
		return usagef("doctor takes no arguments, got %q", pos[0])
	}
	var ans doctorAnswer
	if err := s.withSession(ctx, logger, func(sess *session) error {
		return sess.do(ctx, opDoctor, doctorReq{Repair: repair}, &ans)
	}); err != nil {
		return err
	}
	if repair {
		for _, p := range ans.Removed {
			fmt.Fprintf(stdout, "removed %s\n", p)
		}
		fmt.Fprintf(stdout, "removed %d %s\n", len(ans.Removed), plural(len(ans.Removed), "entry", "entries"))
	}
	for _, p := range ans.Problems {
		fmt.Fprintln(stdout, p)
	}
	for _, c := range ans.Chains {
		fmt.Fprintln(stdout, c)
	}
	n := len(ans.Problems) + len(ans.Chains)
	if n == 0 {
		fmt.Fprintln(stdout, "the store is clean: every record reads and every receipt chain links")
		return nil
	}
	fmt.Fprintf(stdout, "%d %s", n, plural(n, "problem", "problems"))
	if ans.Repairable > 0 {
		fmt.Fprintf(stdout, "; crux doctor --repair removes %d of them", ans.Repairable)
	}
	fmt.Fprintln(stdout)
	return &reportedError{}
}

// plural is one when n is 1, else many.
func plural(n int, one, many string) string {
	if n == 1 {
		return one
	}
	return many
}
