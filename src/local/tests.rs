use super::*;

const GIB: u64 = 1 << 30;

fn machine(total_gib: u64, available_gib: u64, cores: u32, bandwidth: f64) -> MachineProbe {
    MachineProbe {
        mem_total_bytes: total_gib * GIB,
        mem_available_bytes: available_gib * GIB,
        cores,
        memory_bandwidth_gbs: Some(bandwidth),
        gpus: Vec::new(),
        unified_memory: false,
        free_disk_bytes: Some(500_000_000_000),
        notes: Vec::new(),
    }
}

fn nvidia(name: &str, gib: u64) -> Gpu {
    Gpu {
        vendor: GpuVendor::Nvidia,
        name: name.into(),
        memory_bytes: Some(gib * GIB),
        bandwidth_gbs: probe::gpu_bandwidth(name),
    }
}

fn pick(machine: &MachineProbe) -> Recommendation {
    recommend(&Catalogue::builtin(), machine)
}

fn picked(r: &Recommendation) -> (&str, &str, Placement, u32, FitLevel) {
    let p = r.pick.as_ref().expect("a pick");
    (
        p.model.as_str(),
        p.quant.as_str(),
        p.placement,
        p.context,
        p.level,
    )
}

#[test]
fn recorded_machines_get_their_expected_picks() {
    let cpu8 = pick(&machine(8, 6, 4, 20.0));
    let cpu16 = pick(&machine(16, 13, 8, 40.0));
    let cpu64 = pick(&machine(64, 58, 16, 60.0));
    let mut one_gpu = machine(64, 58, 16, 60.0);
    one_gpu.gpus = vec![nvidia("NVIDIA GeForce RTX 4090", 24)];
    let one_gpu = pick(&one_gpu);
    let mut two_gpus = machine(128, 120, 32, 80.0);
    two_gpus.gpus = vec![
        nvidia("NVIDIA GeForce RTX 3090", 24),
        nvidia("NVIDIA GeForce RTX 3090", 24),
    ];
    let two_gpus = pick(&two_gpus);
    let mut unified = machine(32, 28, 12, 204.0);
    unified.unified_memory = true;
    let unified = pick(&unified);
    let all = [
        ("cpu8", &cpu8),
        ("cpu16", &cpu16),
        ("cpu64", &cpu64),
        ("one_gpu", &one_gpu),
        ("two_gpus", &two_gpus),
        ("unified", &unified),
    ];
    let expected = [
        (
            "qwen2.5-coder-3b",
            "Q4_K_M",
            Placement::SystemMemory,
            32_768,
        ),
        (
            "qwen2.5-coder-7b",
            "Q4_K_M",
            Placement::SystemMemory,
            32_768,
        ),
        (
            "qwen3-coder-30b-a3b",
            "Q8_0",
            Placement::SystemMemory,
            131_072,
        ),
        ("devstral-small", "Q4_K_M", Placement::Gpu, 32_768),
        ("qwen2.5-coder-32b", "Q4_K_M", Placement::Gpu, 32_768),
        (
            "qwen3-coder-30b-a3b",
            "Q4_K_M",
            Placement::UnifiedMemory,
            32_768,
        ),
    ];
    for ((name, r), (model, quant, placement, context)) in all.iter().zip(expected) {
        assert_eq!(
            picked(r),
            (model, quant, placement, context, FitLevel::Good),
            "{name}"
        );
        let p = r.pick.as_ref().unwrap();
        assert!(p.share <= GOOD_SHARE, "{name}: {p:?}");
        assert!(p.tokens_per_s.unwrap() >= MIN_TOKENS_PER_S, "{name}");
        // Every fit is within the tight bound; every model is either offered or says why not.
        assert!(r.fits.iter().all(|f| f.share <= TIGHT_SHARE), "{name}");
        assert_eq!(
            r.fits.len() + r.not_offered.len(),
            Catalogue::builtin().local().count(),
            "{name}"
        );
    }
}

#[test]
fn a_model_that_does_not_fit_says_its_need_and_share() {
    let r = pick(&machine(8, 6, 4, 20.0));
    let big = r
        .not_offered
        .iter()
        .find(|n| n.model == "qwen2.5-coder-32b")
        .expect("the 32B model is not offered on 8 GB");
    // The smallest quantization at the least context, against the budget (6 GiB of system memory).
    let need = 19_900_000_000u64 + 262_144 * 32_768 + RUNTIME_OVERHEAD_BYTES;
    let share = need as f64 / (6 * GIB) as f64 * 100.0;
    assert_eq!(
        big.reason,
        format!(
            "Q4_K_M needs {} at 32,768 tokens, {share:.1} % of the budget (6.4 GB of system memory)",
            gb(need)
        )
    );
    // The 1.5B model fits with room to spare: good at its whole window.
    let small = r
        .fits
        .iter()
        .find(|f| f.model == "qwen2.5-coder-1.5b")
        .unwrap();
    assert_eq!(small.context, 32_768);
    assert_eq!(small.level, FitLevel::Good);
}

#[test]
fn fit_levels_follow_the_share_of_the_budget() {
    let catalogue = Catalogue::builtin();
    let (model, local) = catalogue
        .local()
        .find(|(m, _)| m.id == "qwen2.5-coder-7b")
        .unwrap();
    let q4 = &local.quants[0];
    let need = need_bytes(local, q4, 32_768);
    let at = |budget: u64| {
        let budget = Budget {
            placement: Placement::SystemMemory,
            bytes: budget,
            bandwidth_gbs: None,
            basis: String::new(),
        };
        evaluate(model, local, q4, &budget, None).map(|f| f.level)
    };
    let budget_for = |share: f64| (need as f64 / share).ceil() as u64;
    assert_eq!(at(budget_for(0.85)), Ok(FitLevel::Good));
    assert_eq!(at(budget_for(0.90)), Ok(FitLevel::Tight));
    assert_eq!(at(budget_for(0.98)), Ok(FitLevel::Tight));
    assert!(at(budget_for(0.99)).is_err());
}

#[test]
fn too_slow_or_too_big_for_the_disk_is_listed_but_not_picked() {
    // 64 GB of slow memory: the dense 32B model fits, at about 3 tokens/s.
    let r = pick(&machine(64, 58, 16, 60.0));
    let dense = r
        .fits
        .iter()
        .find(|f| f.model == "qwen2.5-coder-32b")
        .unwrap();
    assert!(
        dense.caveat.as_deref().unwrap().contains("tokens/s"),
        "{dense:?}"
    );
    // No room on disk: nothing is picked, everything says why.
    let mut full = machine(64, 58, 16, 60.0);
    full.free_disk_bytes = Some(1_000_000_000);
    let r = pick(&full);
    assert_eq!(r.pick, None);
    assert!(
        r.fits
            .iter()
            .all(|f| f.caveat.as_deref().is_some_and(|c| c.contains("free disk")))
    );
}

#[test]
fn nvidia_smi_and_meminfo_are_read() {
    let gpus = probe::parse_nvidia_smi("NVIDIA GeForce RTX 4090, 24564\nNVIDIA GB10, [N/A]\n");
    assert_eq!(gpus[0].memory_bytes, Some(24_564 << 20));
    assert_eq!(gpus[0].bandwidth_gbs, Some(1008.0));
    assert_eq!(gpus[1].memory_bytes, None);
    assert_eq!(
        probe::parse_meminfo(
            "MemTotal:       16318412 kB\nMemFree: 1 kB\nMemAvailable:   9000000 kB\n"
        ),
        Some((16_318_412 * 1024, 9_000_000 * 1024))
    );
    assert_eq!(probe::parse_meminfo("MemTotal: 1 kB\n"), None);
}

#[tokio::test]
async fn this_machine_is_probed_without_failing() {
    let home = std::env::temp_dir();
    let machine = probe_machine(Some(&home)).await;
    assert!(machine.mem_total_bytes > 0, "{machine:?}");
    assert!(machine.mem_available_bytes <= machine.mem_total_bytes);
    assert!(machine.cores >= 1);
    assert!(machine.memory_bandwidth_gbs.is_some_and(|b| b > 0.0));
    assert!(machine.free_disk_bytes.is_some());
    let r = recommend(&Catalogue::builtin(), &machine);
    assert_eq!(
        r.fits.len() + r.not_offered.len(),
        Catalogue::builtin().local().count()
    );
}
