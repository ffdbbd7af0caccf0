/* test_manifest_name.c — which directory entries are manifests
 * (md_manifest_name, shared by md_state_add_dir and the state source). */
#include "tap.h"
#include "zerohop/model.h"

int main(void)
{
	ok(md_manifest_name("svc.yaml"), "*.yaml");
	ok(md_manifest_name("svc.yml"), "*.yml");
	ok(md_manifest_name("svc.json"), "*.json");
	ok(!md_manifest_name(".svc.yaml"), "a name starting with '.' (temporary)");
	ok(!md_manifest_name(".yaml"), "only the extension");
	ok(!md_manifest_name("svc.yaml~"), "an editor backup");
	ok(!md_manifest_name("README"), "no extension");
	ok(!md_manifest_name("svc.YAML"), "extensions are case-sensitive");
	return done_testing();
}
