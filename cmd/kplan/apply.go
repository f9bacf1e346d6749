package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"time"

	"github.com/spf13/cobra"
	"k8s.io/cli-runtime/pkg/genericclioptions"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/cli-utils/pkg/apply/event"
	"sigs.k8s.io/cli-utils/pkg/object"

	"github.com/kplan-dev/kplan/internal/deploy"
	"github.com/kplan-dev/kplan/internal/inventorydiff"
	"github.com/kplan-dev/kplan/internal/liveplan"
	"github.com/kplan-dev/kplan/internal/plan"
	"github.com/kplan-dev/kplan/internal/resourcegroup"
)

func applyCmd() *cobra.Command {
	var (
		rf                      renderFlags
		kubeconfig, kubecontext string
		rgFile                  string
		// opts are the flags the apply takes, bound as the webhook's
		// deploys bind a target's (deploy.OptionsOf): the dry run and
		// the apply both take them whole.
		opts deploy.Options
	)
	cmd := &cobra.Command{
		Use:   "apply DIR",
		Short: "Apply an overlay and prune what left it, through its inventory",
		Long: "Apply an overlay from the disk with server-side apply, prune what the previous apply of the\n" +
			"same inventory created and this render no longer has, and wait for reconciliation.\n" +
			"DIR is absolute or relative to the current directory.",
		Args: cobra.ExactArgs(1),
	}
	f := cmd.Flags()
	f.StringVar(&kubeconfig, "kubeconfig", "", "kubeconfig file (default: $KUBECONFIG, ~/.kube/config, or in-cluster)")
	f.StringVar(&kubecontext, "context", "", "kubeconfig context (default: its current context)")
	f.StringVarP(&opts.Namespace, "namespace", "n", "", "namespace of the namespaced objects (and the inventory) rendered without one (default: the context's namespace, else default)")
	f.BoolVar(&opts.DryRun, "dry-run", false, "server-side dry run: show what would happen, change nothing")
	f.StringVar(&opts.InventoryPolicy, "inventory-policy", "must-match", "must-match, adopt-if-no-inventory or adopt-all")
	f.StringVar(&opts.PrunePropagation, "prune-propagation", "Background", "Background, Foreground or Orphan")
	// The bound on the whole apply is also the reconcile's: the wait is
	// the apply's last step.
	f.DurationVar(&opts.ReconcileTimeout, "timeout", 5*time.Minute, "bound on the whole apply, reconciliation included (0: no limit)")
	f.BoolVar(&opts.AllowEmpty, "allow-empty", false, "apply an overlay that renders no objects, pruning everything")
	f.BoolVar(&opts.NoPrune, "no-prune", false, "apply without deleting anything")
	f.StringVar(&rgFile, "rg-file", resourcegroup.DefaultFile, "ResourceGroup file in the overlay, used when the render has no inventory")
	f.BoolVar(&opts.AllowReplaceInventory, "allow-replace-inventory", false, "apply even when it would prune every object the inventory holds while adding others (an overlay copied with its inventory)")
	format := outputFlag(cmd, "text", "text or json")
	rf.register(f)
	cmd.RunE = func(cmd *cobra.Command, args []string) error {
		dir := args[0]
		if err := checkFormat(*format, "text", "json"); err != nil {
			return err
		}
		ropts, closeGit, err := rf.options()
		if err != nil {
			return err
		}
		defer closeGit()
		ctx := cmd.Context()
		if opts.ReconcileTimeout > 0 {
			var cancel context.CancelFunc
			ctx, cancel = context.WithTimeout(ctx, opts.ReconcileTimeout)
			defer cancel()
		}
		getter := deploy.NewGetter(kubeconfig, kubecontext)
		if err := haveCluster(getter); err != nil {
			return err
		}
		if opts.Namespace == "" {
			// As kubectl: the context's namespace, else default.
			opts.Namespace, _, err = getter.ToRawKubeConfigLoader().Namespace()
			if err != nil || opts.Namespace == "" {
				opts.Namespace = deploy.DefaultNamespace
			}
		}
		if fi, err := os.Stat(dir); err != nil || !fi.IsDir() {
			return fmt.Errorf("%s is not a directory: name an overlay's directory", dir)
		}
		fSys, rel, err := plan.OpenWorkingTree(ctx, dir, []string{"."})
		if err != nil {
			return err
		}
		_, hasKptfile, _ := resourcegroup.KptfileInventory(dir)
		// As the webhook's deploys: ropts fetch what --remote-hosts allows.
		target, err := deploy.Prepare(ctx, deploy.Source{FS: fSys}, deploy.Settings{
			Overlay: rel[0], Display: dir, Namespace: opts.Namespace, Render: ropts,
			RGFile: rgFile, RGFileExplicit: cmd.Flags().Changed("rg-file"), HasKptfile: hasKptfile}, deploy.Online)
		if err != nil {
			return err
		}
		if opts.DryRun {
			// What the live plans and drift checks compute: each object
			// dry-run applied and compared with the live one, so an
			// unchanged object says so and a changed one shows its fields.
			lp, err := liveplan.New(getter).Plan(ctx, liveplan.Input{Inventory: target.Inventory, Objects: target.Objects, Options: opts})
			if err != nil {
				return fmt.Errorf("apply --dry-run: %w", err)
			}
			if lp.Refused != "" {
				return errors.New(lp.Refused)
			}
			return printDryRun(cmd.OutOrStdout(), lp, *format)
		}
		opts.OnEvent = applyEvents(cmd.ErrOrStderr())
		res, err := deploy.New(getter).Apply(ctx, target.Inventory, target.Objects, opts)
		if errors.Is(ctx.Err(), context.DeadlineExceeded) && err != nil {
			err = fmt.Errorf("apply: not done within --timeout %s: %w", opts.ReconcileTimeout, err)
		}
		// A summary of counts before a failure would read as "0 failed".
		if res != nil && (err == nil || len(res.Objects) > 0) {
			if perr := printApply(cmd.OutOrStdout(), res, *format); perr != nil {
				return perr
			}
		}
		if err != nil {
			return err
		}
		if res.Failed() {
			return errors.New("apply: some objects failed or did not reconcile (see above)")
		}
		return nil
	}
	return cmd
}

// applyEvents prints each object on w as cli-utils reports it (applied,
// pruned, reconciled), so a long apply shows where it is; the summary
// follows on stdout when it ends.
func applyEvents(w io.Writer) func(event.Event) {
	name := func(id object.ObjMetadata) string {
		if id.Namespace == "" {
			return id.GroupKind.Kind + " " + id.Name
		}
		return id.GroupKind.Kind + " " + id.Name + " (" + id.Namespace + ")"
	}
	line := func(id object.ObjMetadata, what string, err error) {
		if err != nil {
			what += ": " + err.Error()
		}
		fmt.Fprintf(w, "kplan apply: %s %s\n", name(id), what)
	}
	return func(e event.Event) {
		switch e.Type {
		case event.ApplyType:
			ae := e.ApplyEvent
			if what, ok := map[event.ApplyEventStatus]string{event.ApplySuccessful: "applied", event.ApplySkipped: "skipped", event.ApplyFailed: "failed"}[ae.Status]; ok {
				line(ae.Identifier, what, ae.Error)
			}
		case event.PruneType:
			pe := e.PruneEvent
			if what, ok := map[event.PruneEventStatus]string{event.PruneSuccessful: "pruned", event.PruneSkipped: "not pruned (skipped)", event.PruneFailed: "failed to prune"}[pe.Status]; ok {
				line(pe.Identifier, what, pe.Error)
			}
		case event.WaitType:
			we := e.WaitEvent
			if what, ok := map[event.WaitEventStatus]string{event.ReconcileSuccessful: "reconciled", event.ReconcileTimeout: "not reconciled in time", event.ReconcileFailed: "failed to reconcile"}[we.Status]; ok {
				line(we.Identifier, what, nil)
			}
		case event.ErrorType:
			fmt.Fprintf(w, "kplan apply: error: %v\n", e.ErrorEvent.Err)
		}
	}
}

// printJSON writes v as apply's -o json: indented, one document.
func printJSON(w io.Writer, v any) error {
	data, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		return err
	}
	_, err = fmt.Fprintf(w, "%s\n", data)
	return err
}

func printApply(w io.Writer, res *deploy.Result, format string) error {
	if format == "json" {
		return printJSON(w, res)
	}
	mode := ""
	if res.DryRun {
		mode = " (dry run: nothing changed)"
	}
	fmt.Fprintf(w, "kplan apply with %s%s\n", res.Inventory, mode)
	counts := map[deploy.Action]int{}
	for _, o := range res.Objects {
		counts[o.Action]++
		line := fmt.Sprintf("  %-20s %s", o.Action, o.Key)
		if o.Status != "" {
			line += "  [" + o.Status + "]"
		}
		if o.Reason != "" {
			line += "  (" + o.Reason + ")"
		}
		if o.Error != "" {
			line += "  error: " + o.Error
		}
		fmt.Fprintln(w, line)
	}
	_, err := fmt.Fprintf(w, "%d created, %d configured, %d unchanged, %d pruned, %d left in the cluster, %d skipped, %d failed.\n",
		counts[deploy.Created], counts[deploy.Configured], counts[deploy.Unchanged], counts[deploy.Pruned],
		counts[deploy.Kept], counts[deploy.Skipped], counts[deploy.Failed])
	for _, warn := range res.Warnings {
		if _, err := fmt.Fprintf(w, "warning: %s\n", warn); err != nil {
			return err
		}
	}
	return err
}

// printDryRun says what the apply would do to each object, named as the
// plan names it, with the fields it would change on the live object;
// nothing was written.
func printDryRun(w io.Writer, res *liveplan.Result, format string) error {
	if format == "json" {
		return printJSON(w, res)
	}
	fmt.Fprintf(w, "kplan apply with %s (dry run: nothing changed)\n", res.Inventory)
	mark := map[liveplan.Action]string{liveplan.Create: "+", liveplan.Configure: "~", liveplan.Unchanged: "=", liveplan.Prune: "-", liveplan.Keep: " "}
	counts := map[liveplan.Action]int{}
	refused := 0
	for _, r := range res.Rows {
		counts[r.Action]++
		what := map[liveplan.Action]string{liveplan.Create: "created", liveplan.Configure: "configured", liveplan.Unchanged: "unchanged",
			liveplan.Prune: "pruned", liveplan.Keep: "left in the cluster"}[r.Action]
		if r.Drift {
			what += " (drifted: undoes a change made in the cluster)"
		}
		fmt.Fprintf(w, "  %s %s: %s\n", mark[r.Action], inventorydiff.Name(r.Key), what)
		for _, f := range r.Fields {
			fmt.Fprintf(w, "      %s\n", f.Header())
			for _, l := range f.DiffLines() {
				fmt.Fprintf(w, "        %s\n", l)
			}
		}
		if r.Note != "" {
			fmt.Fprintf(w, "      note: %s\n", r.Note)
		}
		if r.Finding != nil {
			refused++
			fmt.Fprintf(w, "      refused (%s): %s\n", r.Finding.Kind, r.Finding.Message)
		}
	}
	_, err := fmt.Fprintf(w, "%d created, %d configured, %d unchanged, %d pruned, %d left in the cluster, %d refused (dry run).\n",
		counts[liveplan.Create], counts[liveplan.Configure], counts[liveplan.Unchanged], counts[liveplan.Prune], counts[liveplan.Keep], refused)
	return err
}

func initCmd() *cobra.Command {
	var (
		s      resourcegroup.Spec
		rgFile string
	)
	cmd := &cobra.Command{
		Use:   "init [DIR]",
		Short: "Write the overlay's ResourceGroup file (its inventory)",
		Args:  cobra.MaximumNArgs(1),
	}
	f := cmd.Flags()
	f.StringVar(&s.Name, "name", "", "ResourceGroup name (default inventory-<8 digits>)")
	f.StringVar(&s.Namespace, "namespace", "default", "ResourceGroup namespace")
	f.StringVar(&s.InventoryID, "inventory-id", "", "inventory-id label, to take over an existing inventory (default: <name>-<namespace> at apply)")
	f.StringVar(&rgFile, "rg-file", resourcegroup.DefaultFile, "file to write")
	cmd.RunE = func(cmd *cobra.Command, args []string) error {
		p, err := resourcegroup.Init(dirArg(args), rgFile, s)
		if err != nil {
			return err
		}
		fmt.Fprintf(cmd.OutOrStdout(), "wrote %s\n", p)
		return nil
	}
	return cmd
}

func migrateCmd() *cobra.Command {
	var rgFile string
	cmd := &cobra.Command{
		Use:   "migrate [DIR]",
		Short: "Turn a Kptfile inventory into a ResourceGroup file",
		Args:  cobra.MaximumNArgs(1),
	}
	cmd.Flags().StringVar(&rgFile, "rg-file", resourcegroup.DefaultFile, "file to write")
	cmd.RunE = func(cmd *cobra.Command, args []string) error {
		dir := dirArg(args)
		p, err := resourcegroup.Migrate(dir, rgFile)
		if err != nil {
			return err
		}
		fmt.Fprintf(cmd.OutOrStdout(), "wrote %s and removed the inventory from %s\n", p, filepath.Join(dir, "Kptfile"))
		return nil
	}
	return cmd
}

// haveCluster refuses to go on without a cluster to talk to: client-go
// would otherwise fall back to http://localhost:8080 in silence.
func haveCluster(getter genericclioptions.RESTClientGetter) error {
	raw, err := getter.ToRawKubeConfigLoader().RawConfig()
	if err != nil {
		return fmt.Errorf("apply: read the kubeconfig: %w", err)
	}
	if len(raw.Clusters) == 0 {
		if _, err := rest.InClusterConfig(); err != nil {
			return errors.New("apply: no cluster to apply to: no kubeconfig ($KUBECONFIG, or ~/.kube/config) and not running in a cluster; pass --kubeconfig")
		}
	}
	if _, err := getter.ToRESTConfig(); err != nil {
		return fmt.Errorf("apply: kubeconfig: %w", err)
	}
	return nil
}

// dirArg is the one optional directory argument, default ".".
func dirArg(args []string) string {
	if len(args) > 0 {
		return args[0]
	}
	return "."
}
