//! Typed tables: keys and values as Rust types instead of bytes. An inventory with items
//! stored as JSON (feature `serde`), an index from names to ids, and a log of stock changes
//! keyed by signed timestamps, read back in order and by range.
//!
//!     cargo run --release -p larchdb --features serde --example typed [DIR]

use larchdb::typed::Json;
use larchdb::{Database, Durability, Options, TableDefinition};
use serde::{Deserialize, Serialize};

#[derive(Serialize, Deserialize, Debug, PartialEq)]
struct Item {
    name: String,
    stock: u32,
    price_cents: u64,
}

const ITEMS: TableDefinition<u64, Json<Item>> = TableDefinition::new("items");
const BY_NAME: TableDefinition<&str, u64> = TableDefinition::new("items_by_name");
const CHANGES: TableDefinition<i64, i32> = TableDefinition::new("stock_changes");

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let dir = match std::env::args().nth(1) {
        Some(d) => std::path::PathBuf::from(d),
        None => std::env::temp_dir().join(format!("larch-typed-{}", std::process::id())),
    };
    std::fs::create_dir_all(&dir)?;
    let path = dir.join("inventory.larch");

    let db = Database::open(&path, Options::default())?;
    let mut w = db.begin_write()?;
    for (id, name, stock, price_cents) in [
        (1, "bolt", 500, 12),
        (2, "nut", 800, 5),
        (3, "gear", 40, 990),
    ] {
        let item = Item {
            name: name.to_string(),
            stock,
            price_cents,
        };
        w.open_table(ITEMS)?.put(id, &item)?;
        w.open_table(BY_NAME)?.put(name, id)?;
    }
    // Timestamps before and after zero sort as numbers, not as their bytes would.
    let mut changes = w.open_table(CHANGES)?;
    for (at, delta) in [(-20, 100), (-5, -30), (0, 7), (15, -2)] {
        changes.put(at, delta)?;
    }
    w.commit_with(Durability::Immediate)?;

    let r = db.begin_read()?;
    let id = r
        .open_table(BY_NAME)?
        .get("gear")?
        .ok_or("gear not found")?;
    let gear = r.open_table(ITEMS)?.get(id)?.ok_or("item not found")?;
    println!(
        "gear: id {id}, {} in stock at {} cents",
        gear.stock, gear.price_cents
    );
    assert_eq!(gear.stock, 40);

    let names: Vec<&str> = r
        .open_table(BY_NAME)?
        .iter()
        .map(|e| e.map(|(k, _)| k))
        .collect::<Result<_, _>>()?;
    println!("names in order: {names:?}");
    assert_eq!(names, ["bolt", "gear", "nut"]);

    let before_zero: Vec<(i64, i32)> = r
        .open_table(CHANGES)?
        .range(..0)
        .collect::<Result<_, _>>()?;
    println!("changes before t=0: {before_zero:?}");
    assert_eq!(before_zero, [(-20, 100), (-5, -30)]);

    // The same table opened with other types is refused, not misread.
    const WRONG: TableDefinition<u64, u64> = TableDefinition::new("items");
    match r.open_table(WRONG) {
        Err(e) => println!("opening items as u64 -> u64: {e}"),
        Ok(_) => return Err("a table opened with the wrong types".into()),
    }
    drop(r);
    drop(db);
    std::fs::remove_dir_all(&dir)?;
    Ok(())
}
