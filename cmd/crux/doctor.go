package main

import (
	"fmt"

	"github.com/spf13/cobra"
)

// newDoctorCmd returns crux doctor [--repair]: lists the records of the
// store that cannot be read (and the index entries naming them or naming
// nothing) and the fact versions stored in the future (store.DiagnoseAt),
// and checks every tenant's receipt chain; with --repair it first
// removes, in one transaction, what store.Repair can remove, printing each
// removal (see host.doctor). It creates no server, so nothing seeds or
// purges for it. It returns a reportedError, for status 1, when problems
// remain.
func newDoctorCmd(a *app) *cobra.Command {
	var cf *commonFlags
	var repair bool
	c := &cobra.Command{
		Use:   "doctor [--data DIR] [--repair]",
		Short: "Check the store for unreadable records and broken receipt chains",
		Long: `Check the store: list each record that cannot be read (a fact, a forget
record, a forgotten fact) and each index entry that names such a fact or
names none, by bucket and key, each fact version stored more than 5 minutes
ahead of this clock (listed, never removed), and check each tenant's
receipt chain. With
--repair, first remove in one transaction the unreadable facts, the index
entries and pins naming them and the index entries naming no fact, printing
each removal; forget records and receipts are never removed. Exits 0 when
the store is clean, else 1. Tools skip unreadable records and log each
once; this is how to find and remove them.`,
		RunE: func(c *cobra.Command, pos []string) error {
			s, err := resolveOperator("doctor", c.Flags(), cf, a.env)
			if err != nil {
				return err
			}
			if err := noArgs("doctor", pos); err != nil {
				return err
			}
			return a.doctor(s, repair)
		},
	}
	cf = withOperator(c)
	c.Flags().BoolVar(&repair, "repair", false, "remove the unreadable facts and the index entries naming them")
	return c
}

func (a *app) doctor(s *setup, repair bool) error {
	ctx, stdout := a.ctx, a.stdout
	var ans doctorAnswer
	if err := s.withSession(ctx, a.logger, func(sess *session) error {
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
