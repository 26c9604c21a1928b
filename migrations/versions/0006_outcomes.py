"""calls.outcome, calls.outcome_reason, turns.outcome: what a call and each turn came to

Revision ID: 0006
Revises: 0005
Create Date: 2026-11-27

"""
from typing import Sequence, Union

from alembic import op
import sqlalchemy as sa


# revision identifiers, used by Alembic.
revision: str = '0006'
down_revision: Union[str, Sequence[str], None] = '0005'
branch_labels: Union[str, Sequence[str], None] = None
depends_on: Union[str, Sequence[str], None] = None


def upgrade() -> None:
    """Upgrade schema."""
    with op.batch_alter_table('calls') as batch_op:
        batch_op.add_column(sa.Column('outcome', sa.String(length=32), nullable=True))
        batch_op.add_column(sa.Column('outcome_reason', sa.String(length=32), nullable=True))
    with op.batch_alter_table('turns') as batch_op:
        batch_op.add_column(sa.Column('outcome', sa.String(length=32), nullable=True))


def downgrade() -> None:
    """Downgrade schema."""
    with op.batch_alter_table('turns') as batch_op:
        batch_op.drop_column('outcome')
    with op.batch_alter_table('calls') as batch_op:
        batch_op.drop_column('outcome_reason')
        batch_op.drop_column('outcome')
