package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"time"

	"github.com/kplan-dev/kplan/internal/deploy"
	"github.com/kplan-dev/kplan/internal/plan"
	"github.com/kplan-dev/kplan/internal/resourcegroup"
)

func runApply(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fset := flag.NewFlagSet("kplan apply", flag.ContinueOnError)
	fset.SetOutput(stderr)
	var (
		rf          renderFlags
		kubeconfig  = fset.String("kubeconfig", "", "kubeconfig file (default: $KUBECONFIG, ~/.kube/config, or in-cluster)")
		kubecontext = fset.String("context", "", "kubeconfig context")
		dryRun      = fset.Bool("dry-run", false, "server-side dry run: show what would happen, change nothing")
		policy      = fset.String("inventory-policy", "must-match", "must-match, adopt-if-no-inventory or adopt-all")
		propagation = fset.String("prune-propagation", "Background", "Background, Foreground or Orphan")
		timeout     = fset.Duration("timeout", 5*time.Minute, "how long to wait for applied objects to reconcile (0: no limit)")
		allowEmpty  = fset.Bool("allow-empty", false, "apply an overlay that renders no objects, pruning everything")
		noPrune     = fset.Bool("no-prune", false, "apply without deleting anything")
		rgFile      = fset.String("rg-file", resourcegroup.DefaultFile, "ResourceGroup file in the overlay, used when the render has no inventory")
		format      = fset.String("format", "text", "text or json")
		replace     = fset.Bool("allow-replace-inventory", false, "apply even when it would prune every object the inventory holds while adding others (an overlay copied with its inventory)")
		namespace   string
	)
	const nsUsage = "namespace of the namespaced objects (and the inventory) rendered without one"
	fset.StringVar(&namespace, "namespace", deploy.DefaultNamespace, nsUsage)
	fset.StringVar(&namespace, "n", deploy.DefaultNamespace, nsUsage+" (shorthand)")
	rf.register(fset)
	if err := fset.Parse(args); err != nil {
		return exitError(2)
	}
	if fset.NArg() != 1 {
		return errors.New("apply: name one overlay directory, e.g. kplan apply overlays/prod")
	}
	dir := fset.Arg(0)
	ropts, err := rf.options()
	if err != nil {
		return err
	}
	results, err := plan.RenderWorkingTree(ctx, ".", []string{dir}, ropts)
	if err != nil {
		return err
	}
	r := results[0]
	if r.Err != nil {
		return r.Err
	}
	rg, err := os.ReadFile(filepath.Join(dir, *rgFile))
	if errors.Is(err, fs.ErrNotExist) {
		rg, err = nil, nil
	}
	if err != nil {
		return err
	}
	_, hasKptfile, _ := resourcegroup.KptfileInventory(dir)
	explicit := false
	fset.Visit(func(f *flag.Flag) { explicit = explicit || f.Name == "rg-file" })
	target, err := deploy.TargetOf(r, deploy.Source{RGFile: rg, RGFileExplicit: explicit, HasKptfile: hasKptfile, Namespace: namespace})
	if err != nil {
		return err
	}
	res, err := deploy.New(deploy.NewGetter(*kubeconfig, *kubecontext)).Apply(ctx, target.Inventory, target.Objects, deploy.Options{
		DryRun: *dryRun, InventoryPolicy: *policy, PrunePropagation: *propagation,
		ReconcileTimeout: *timeout, AllowEmpty: *allowEmpty, NoPrune: *noPrune,
		Namespace: namespace, AllowReplaceInventory: *replace,
	})
	if res != nil {
		if perr := printApply(stdout, res, *format); perr != nil {
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

func printApply(w io.Writer, res *deploy.Result, format string) error {
	if format == "json" {
		data, err := json.MarshalIndent(res, "", "  ")
		if err != nil {
			return err
		}
		_, err = fmt.Fprintf(w, "%s\n", data)
		return err
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

func runInit(args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("kplan init", flag.ContinueOnError)
	fs.SetOutput(stderr)
	var s resourcegroup.Spec
	fs.StringVar(&s.Name, "name", "", "ResourceGroup name (default inventory-<8 digits>)")
	fs.StringVar(&s.Namespace, "namespace", "default", "ResourceGroup namespace")
	fs.StringVar(&s.InventoryID, "inventory-id", "", "inventory-id label, to take over an existing inventory (default: <name>-<namespace> at apply)")
	rgFile := fs.String("rg-file", resourcegroup.DefaultFile, "file to write")
	if err := fs.Parse(args); err != nil {
		return exitError(2)
	}
	dir := "."
	if fs.NArg() > 0 {
		dir = fs.Arg(0)
	}
	p, err := resourcegroup.Init(dir, *rgFile, s)
	if err != nil {
		return err
	}
	fmt.Fprintf(stdout, "wrote %s\n", p)
	return nil
}

func runMigrate(args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("kplan migrate", flag.ContinueOnError)
	fs.SetOutput(stderr)
	rgFile := fs.String("rg-file", resourcegroup.DefaultFile, "file to write")
	if err := fs.Parse(args); err != nil {
		return exitError(2)
	}
	dir := "."
	if fs.NArg() > 0 {
		dir = fs.Arg(0)
	}
	p, err := resourcegroup.Migrate(dir, *rgFile)
	if err != nil {
		return err
	}
	fmt.Fprintf(stdout, "wrote %s and removed the inventory from %s\n", p, filepath.Join(dir, "Kptfile"))
	return nil
}
