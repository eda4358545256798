//! Entry point: everything happens in `opsbook::run`, which maps the outcome to an exit code.
//! The heap is counted (`opsbook_base::CountingAllocator`): a run whose data grows past its bound is
//! stopped in words rather than killed by the kernel.

#[global_allocator]
static HEAP: opsbook_base::CountingAllocator = opsbook_base::CountingAllocator;

fn main() -> std::process::ExitCode {
    opsbook::run()
}
